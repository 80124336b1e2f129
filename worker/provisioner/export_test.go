package provisioner

// QueueHighWater is queueHighWater, for the tests of the package's users.
const QueueHighWater = queueHighWater
