package kubernetes

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// maxFileBytes bounds every file the environ reads for a spec: templates, the kubeconfig and
// the files the kubeconfig names. They are small text files (a kubeconfig with a few embedded
// certificates is a few KiB); the bound keeps a path to a device, a pipe or a huge file from
// hanging the agent or filling its memory.
const maxFileBytes = 1 << 20

// maxFileText is maxFileBytes as errors say it.
const maxFileText = "1 MiB"

// readFile reads the regular file at path, of at most maxFileBytes. It checks the path before
// opening it (opening a FIFO blocks until a writer comes) and the open file again. Its errors
// say what is wrong with the file without naming it; callers name the field and the path.
func readFile(path string) ([]byte, error) {
	if err := checkFile(path); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, unwrapPathError(err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, unwrapPathError(err)
	}
	if err := checkFileInfo(info); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, unwrapPathError(err)
	}
	if len(data) > maxFileBytes {
		return nil, errTooLarge
	}
	return data, nil
}

// checkFile checks, without opening it, that path is a regular file of at most maxFileBytes.
func checkFile(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return unwrapPathError(err)
	}
	return checkFileInfo(info)
}

var errTooLarge = fmt.Errorf("is larger than %s, the most Berth reads of a file a spec names", maxFileText)

func checkFileInfo(info fs.FileInfo) error {
	mode := info.Mode()
	if !mode.IsRegular() {
		return fmt.Errorf("is not a regular file but %s", fileKind(mode))
	}
	if info.Size() > maxFileBytes {
		return errTooLarge
	}
	return nil
}

// fileKind names the kind of file of a mode that is not regular.
func fileKind(mode fs.FileMode) string {
	switch {
	case mode.IsDir():
		return "a directory"
	case mode&fs.ModeCharDevice != 0:
		return "a character device"
	case mode&fs.ModeDevice != 0:
		return "a device"
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	}
	return "a file of type " + mode.Type().String()
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
