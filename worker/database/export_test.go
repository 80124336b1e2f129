package database

// Connected is closed once w has connected and migrated the store.
func Connected(w *Worker) <-chan struct{} { return w.connected }
