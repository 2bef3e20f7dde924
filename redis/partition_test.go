package redisqueue

// queueKeysOf returns the keys of the unpartitioned queue called name, or
// of partition 0 of a partitioned one.
func queueKeysOf(name string) queueKeys {
	return partitionKeys(name, 1)[0]
}

// partitionKeys returns the keys of each of the n partitions of the queue
// called name.
func partitionKeys(name string, n int) []queueKeys {
	var keys []queueKeys
	for _, prefix := range partitionPrefixes(name, n) {
		keys = append(keys, newQueueKeys(prefix))
	}
	return keys
}
