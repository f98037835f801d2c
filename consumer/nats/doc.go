// Package nats reads the objects the bridge publishes to NATS JetStream:
// NewLog gives the consumer.Log of one resource of one cluster (optionally
// one namespace), and NewListerWatcher the cache.ListerWatcher on it, for
// client-go informers that run from the stream alone.
//
// A Log reads only its own subjects: the filter is made from the bridge's
// subject layout (Config.Subject, Config.SubjectPrefix) with the cluster,
// group, resource and namespace escaped and bounded as the bridge does,
// every other placeholder a wildcard. Each ReadState or Follow call reads
// with an ordered consumer of its own (memory storage, no acks), deleted
// when the call returns (a call cancelled while the server is slow to
// create it returns after 2 s, and the consumer is deleted once created,
// or by the server after a minute without reads), so that many Logs in
// one process, and many processes, cost the server one small consumer per
// active read.
//
// Guarantees:
//
//   - ReadState reads, in stream order, the last message of every subject
//     of the filter as of when it starts, and returns the position after
//     the last one. A Follow from it continues with the next message of
//     the filter: no gap and no repeat. A filter with no message returns
//     at once; one whose last messages expire while it reads returns as
//     soon as the server has nothing left to deliver.
//   - Follow passes each later message of the filter, in stream order,
//     and a progress record (no key) as soon as it has read everything,
//     then every 5 s while nothing arrives. Progress records carry a
//     fresh time of the server, so an informer's position stays
//     followable however long its resource is quiet.
//   - A message the sink wrote is decoded with wire.NATS.Decode (both
//     content modes); one that does not decode is a record with Err set.
//     A marker the server writes when a subject's last message expires
//     (header Nats-Marker-Reason, with SubjectDeleteMarkerTTL) is a record
//     of that subject without a message: the object is gone.
//   - Follow returns an error wrapping consumer.ErrExpired, and the
//     informer lists again, when the stream may no longer hold every
//     message after the position: the stream was deleted or recreated (its
//     creation time differs), the position's sequence is past the
//     stream's last, a stream with limits dropped messages after it, or the
//     position's time is older, by the server's clock, than the stream's
//     delete grace less a tenth. The grace is the stream's metadata
//     kubebus.io/delete-ttl (the bridge's BRIDGE_NATS_DELETE_TTL), or its
//     MaxAge when shorter; a stream that allows per-message TTLs without
//     that metadata is refused, since no one could tell when a delete
//     expires. A running Follow returns it too when the stream is
//     recreated under it, and when it falls behind by more than that (its
//     handler is slow, or the server cannot be reached). What is not a
//     position of this Log (another stream, another filter, not a
//     position at all) is expired as well.
//
// Positions are "n1.<log>.<created>.<seq>.<time>": a hash of the stream
// and filter, the stream's creation time, the stream sequence of the last
// message read, and a time of the server (Unix ms) at which every message
// of the filter stored before it had been read. Progress records refresh
// the time, so the age check concerns only readers that stopped.
//
// Purging a stream removes objects without a record: consumers do not see
// it. Delete and recreate the stream instead, which makes every informer
// list again.
package nats
