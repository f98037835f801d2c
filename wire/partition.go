package wire

import "encoding/binary"

// PartitionFor is the partition of a topic with the given number of
// partitions that records with key go to, as Kafka's Java client's
// default partitioner places keyed records:
//
//	partition = (murmur2(key) & 0x7fffffff) % partitions
//
// where murmur2 is Kafka's 32-bit MurmurHash2 (seed 0x9747b28c) of the
// key's bytes. Every record the bridge writes has a key (tombstones
// included), so the partition depends on the key and the partition count
// alone; consumers can rely on it. Adding partitions to a topic moves
// keys, and with them the order between an object's records written
// before and after the change.
//
// It is part of the format rather than left to a client library: the
// bridge writes with one Kafka client and its consumers read with
// another, and both must agree. Its tests check it against the Java
// client's own test vectors and both libraries' partitioners.
func PartitionFor(key []byte, partitions int) int {
	if partitions <= 0 {
		return 0
	}
	return int(murmur2(key)&0x7fffffff) % partitions
}

// murmur2 is Kafka's MurmurHash2: 32 bits, seed 0x9747b28c, the key's
// bytes read as little-endian words.
func murmur2(data []byte) uint32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	h := uint32(seed) ^ uint32(len(data))
	for len(data) >= 4 {
		k := binary.LittleEndian.Uint32(data)
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		data = data[4:]
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}
