package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"

	"github.com/kubebus/bridge/wire"
)

// maxInFlight is how many produce requests the producer keeps in flight to
// one broker, as the Java producer's max.in.flight.requests.per.connection.
// A second one goes only for records that waited linger behind the first,
// or for a full batch.
const maxInFlight = 5

// maxRequestBytes bounds the records of one produce request, whatever its
// partitions: well under the brokers' socket.request.max.bytes (100 MiB by
// default), past which a broker drops the connection. A request holds at
// least one record, so it may be larger with a larger record limit.
const maxRequestBytes = 16 << 20

// producer writes records to the partition leaders with produce requests
// of its own, one per broker holding every partition led by that broker,
// built below kafka-go's Writer, on the same Transport (which routes each
// request to the leader it names and reuses the connections).
//
// It lingers only while a broker has a request in flight: a record bound
// for an idle broker leaves at once, alone if nothing else is queued,
// while the records that arrive during a request wait for its answer and
// then go together in the next one. A busy stream so fills its requests
// (up to batchSize records and batchBytes bytes per partition) without a
// lone change ever waiting for a batch that does not come. Records that
// waited linger behind a request still in flight go in another request
// beside it (at most maxInFlight), and so does a full batch.
//
// Records are handed to kafka-go as they are: the key, the value and the
// header values are the caller's slices, read when kafka-go encodes the
// request. kafka-go copies them once, into the request's buffer
// (protocol.WriteRequest renders the whole request in memory, to size it
// and to checksum each record batch, before it writes it to the
// connection); it offers no way around that buffer, since a
// RawProduceRequest takes records already encoded, which is the same copy
// made by the caller. Nothing else is copied: the Writer copied no bytes
// either (only its Message structs), and the event reaches the sink
// already encoded in one buffer (wire.Message.MarshalJSON returns it). In
// a CPU profile that one copy is runtime.memmove under
// (*bytesReader).WriteTo, called by kafka-go's
// protocol.(*encoder).writeVarNullBytesFrom: 1.8% of the process's CPU
// in the bridge's runs of BenchmarkThroughput's Kafka rows (both
// workloads), about 5% in BenchmarkPublishConcurrent, where the sink and
// the in-process brokers are all there is.
//
// Order: records of one partition are written in the order they were
// handed over, but two requests to one broker may be in flight together,
// so a record may reach the log before one handed over earlier. The sink
// never has two records of one key in flight (see Publish), so records of
// one object keep their order. A caller that stops waiting (its context
// ended) may leave records in flight, and hand the same keys over again:
// those later records wait until the request of the earlier ones is
// answered (see held), so that they never land before them.
type producer struct {
	transport  *kafkago.Transport
	addr       net.Addr
	acks       kafkago.RequiredAcks
	attributes protocol.Attributes // the compression codec
	batchSize  int
	batchBytes int
	linger     time.Duration
	timeout    time.Duration

	mu      sync.Mutex
	brokers map[int32]*brokerQueue
	closed  bool
	busy    int           // requests in flight, to every broker
	idle    chan struct{} // closed once closed, with nothing queued or in flight
	// held counts, by key, the records in flight whose caller stopped
	// waiting: no record of such a key goes until their requests are
	// answered. released is closed (and forgotten) when a key leaves held.
	held     map[recordKey]int
	released chan struct{}
}

// recordKey is a record's key in its topic-partition.
type recordKey struct {
	topic     string
	partition int32
	key       string
}

// brokerQueue is what waits for one broker: records not sent yet, in the
// order they came, and the requests in flight.
type brokerQueue struct {
	queue    []*pending
	parts    map[topicPartition]partBatch // what queue holds of each partition
	full     int                          // partitions of parts with a full batch
	since    time.Time                    // when the oldest record of queue came
	inflight int
	timer    *time.Timer // armed while records wait behind a request
	waiting  int         // records of queue left by the last take for their key (see held)
}

type topicPartition struct {
	topic     string
	partition int32
}

// partBatch counts records of one partition.
type partBatch struct{ count, bytes int }

// pending is a record handed to the producer and not answered yet.
type pending struct {
	rec       *kafkago.Message
	partition int32
	size      int
	call      *call
	i         int  // the record's index in call
	sent      bool // in a request not answered yet
	holds     bool // counted in producer.held
}

func (pd *pending) key() recordKey {
	return recordKey{pd.rec.Topic, pd.partition, string(pd.rec.Key)}
}

// call is one produce call: its records' outcomes, and how many are still
// unanswered. Outcomes are given with producer.mu held.
type call struct {
	errs      []error
	left      int
	done      chan struct{}
	abandoned atomic.Bool // the caller stopped waiting: drop what is not sent
}

// errUnanswered marks a record of a call that has no outcome yet.
var errUnanswered = errors.New("unanswered")

func (c *call) answer(i int, err error) {
	c.errs[i] = err
	if c.left--; c.left == 0 {
		close(c.done)
	}
}

// errProducerClosed is the error of a record handed over after close.
var errProducerClosed = errors.New("producer closed")

// produce writes recs and returns one error per record: nil once the
// record is acknowledged (or sent, without acks). It returns when every
// record is answered or ctx ends; records not sent by then are dropped,
// and those in flight are answered to nobody (and hold their keys until
// they are). A call whose ctx has ended sends nothing. A record larger
// than batchBytes fails without being sent (see errTooLarge).
func (p *producer) produce(ctx context.Context, recs []*kafkago.Message) []error {
	c := &call{errs: make([]error, len(recs)), left: len(recs), done: make(chan struct{})}
	if len(recs) == 0 {
		return c.errs
	}
	fail := func(err error) []error {
		for i := range recs {
			c.errs[i] = err
		}
		return c.errs
	}
	if ctx.Err() != nil {
		return fail(notSent(ctx))
	}
	routes := p.route(ctx, recs)
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		return fail(errProducerClosed)
	case ctx.Err() != nil:
		p.mu.Unlock()
		return fail(notSent(ctx))
	}
	var now time.Time
	pends := make([]pending, len(recs)) // one allocation for the call's records
	var touched []*brokerQueue          // the brokers they go to
	for i, rec := range recs {
		c.errs[i] = errUnanswered
		r := routes[i]
		size := recordSize(rec)
		switch {
		case r.err != nil:
			c.answer(i, r.err)
			continue
		case size > p.batchBytes:
			c.answer(i, errTooLarge(size, p.batchBytes))
			continue
		}
		if now.IsZero() {
			now = time.Now()
		}
		pends[i] = pending{rec: rec, partition: r.partition, size: size, call: c, i: i}
		if b := p.enqueue(&pends[i], r.leader, now); !slices.Contains(touched, b) {
			touched = append(touched, b)
		}
	}
	// Every record is queued before any goes, so that the first request
	// to a broker takes all of the call's records for it.
	for _, b := range touched {
		p.dispatch(b, now)
	}
	p.mu.Unlock()
	select {
	case <-c.done:
		return c.errs
	case <-ctx.Done():
	}
	err := fmt.Errorf("not acknowledged: %w", context.Cause(ctx))
	p.mu.Lock()
	defer p.mu.Unlock()
	c.abandoned.Store(true)
	out := make([]error, len(recs))
	for i, e := range c.errs {
		if out[i] = e; e == errUnanswered {
			out[i] = err
			if pends[i].sent {
				p.hold(&pends[i])
			}
		}
	}
	return out
}

// hold counts pd, in flight, in p.held. Called with p.mu held.
func (p *producer) hold(pd *pending) {
	if p.held == nil {
		p.held = map[recordKey]int{}
	}
	pd.holds = true
	p.held[pd.key()]++
}

// unhold takes pd, answered, out of p.held, and reports whether its key
// left it. Called with p.mu held.
func (p *producer) unhold(pd *pending) bool {
	pd.sent = false
	if !pd.holds {
		return false
	}
	pd.holds = false
	k := pd.key()
	if p.held[k]--; p.held[k] > 0 {
		return false
	}
	delete(p.held, k)
	if p.released != nil {
		close(p.released)
		p.released = nil
	}
	return true
}

// isHeld reports whether a record of pd's key is in flight for a caller
// that stopped waiting. Called with p.mu held.
func (p *producer) isHeld(pd *pending) bool {
	return len(p.held) > 0 && p.held[pd.key()] > 0
}

// release sends what waited for a key that left p.held. Called with p.mu
// held.
func (p *producer) release(now time.Time) {
	for _, b := range p.brokers {
		b.waiting = 0
		p.dispatch(b, now)
	}
}

// produceAlone writes each of recs in a produce request of its own, one
// after the other, bypassing the queues. Once ctx ends it sends no more of
// them, and returns without waiting for the one in flight: that request
// goes on, bounded by ctx's deadline if it has one and by the producer's
// request timeout, and counts as in flight for close.
func (p *producer) produceAlone(ctx context.Context, recs []*kafkago.Message) []error {
	out := make([]error, len(recs))
	for i, r := range p.route(ctx, recs) {
		size := recordSize(recs[i])
		switch {
		case ctx.Err() != nil:
			out[i] = notSent(ctx)
		case r.err != nil:
			out[i] = r.err
		case size > p.batchBytes:
			out[i] = errTooLarge(size, p.batchBytes)
		default:
			out[i] = p.sendAlone(ctx, &pending{rec: recs[i], partition: r.partition, size: size})
		}
	}
	return out
}

// sendAlone sends pd in a request of its own and returns its outcome, or
// ctx's error once ctx ends.
func (p *producer) sendAlone(ctx context.Context, pd *pending) error {
	p.mu.Lock()
	for {
		switch {
		case p.closed:
			p.mu.Unlock()
			return errProducerClosed
		case ctx.Err() != nil:
			p.mu.Unlock()
			return notSent(ctx)
		}
		if !p.isHeld(pd) {
			break
		}
		if p.released == nil {
			p.released = make(chan struct{})
		}
		released := p.released
		p.mu.Unlock()
		select {
		case <-released:
		case <-ctx.Done():
		}
		p.mu.Lock()
	}
	p.busy++
	pd.sent = true
	p.mu.Unlock()

	// The request keeps ctx's values and deadline, not its cancellation: a
	// request written to a connection is not taken back, so the producer
	// counts it until the broker answers or the deadline passes.
	rctx, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
	if deadline, ok := ctx.Deadline(); ok {
		rctx, cancel = context.WithDeadline(rctx, deadline)
	}
	done := make(chan error, 1)
	go func() {
		err := p.request(rctx, []*pending{pd})[0]
		cancel()
		p.mu.Lock()
		defer p.mu.Unlock()
		p.busy--
		done <- err
		if p.unhold(pd) {
			p.release(time.Now())
		}
		p.settle()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case err := <-done:
		return err // answered as ctx ended
	default:
	}
	p.hold(pd)
	return fmt.Errorf("not acknowledged: %w", context.Cause(ctx))
}

// notSent is the error of a record not sent because ctx ended.
func notSent(ctx context.Context) error {
	return fmt.Errorf("not sent: %w", context.Cause(ctx))
}

// route is where a record goes: its partition and that partition's
// leader, or the error that keeps it from going (a *routeError).
type route struct {
	partition int32
	leader    int32
	err       error
}

// routeError is the error of a record that found no broker to go to: the
// transport's metadata could not be had, or named no leader for the
// record's partition (a Kafka error code taken from the metadata the
// transport caches, such as LEADER_NOT_AVAILABLE). No request was sent,
// so no broker answered the record.
type routeError struct{ err error }

func (e *routeError) Error() string { return e.err.Error() }
func (e *routeError) Unwrap() error { return e.err }

// route finds the partition of each record (wire.PartitionFor of its key
// among the topic's partitions, as kafka-go's Writer placed it with the
// sink's balancer) and the partition's leader, from the metadata the
// transport caches: one look-up per topic.
func (p *producer) route(ctx context.Context, recs []*kafkago.Message) []route {
	out := make([]route, len(recs))
	var (
		topic   string
		leaders []int32
		err     error
	)
	for i, rec := range recs {
		if i == 0 || rec.Topic != topic {
			topic = rec.Topic
			leaders, err = p.leaders(ctx, topic)
		}
		if err != nil {
			out[i].err = &routeError{err}
			continue
		}
		part := wire.PartitionFor(rec.Key, len(leaders))
		out[i] = route{partition: int32(part), leader: leaders[part]}
		if out[i].leader < 0 {
			out[i].err = &routeError{fmt.Errorf("topic %s partition %d: %w", topic, part, kafkago.LeaderNotAvailable)}
		}
	}
	return out
}

// leaders returns the leader of each partition of topic, by partition, -1
// for one without a leader, as the transport's cached metadata says.
func (p *producer) leaders(ctx context.Context, topic string) ([]int32, error) {
	res, err := p.transport.RoundTrip(ctx, p.addr, &metadataAPI.Request{TopicNames: []string{topic}})
	if err != nil {
		return nil, err
	}
	for _, t := range res.(*metadataAPI.Response).Topics {
		if t.Name != topic {
			continue
		}
		if t.ErrorCode != 0 {
			return nil, fmt.Errorf("topic %s: %w", topic, kafkago.Error(t.ErrorCode))
		}
		if len(t.Partitions) == 0 {
			break
		}
		leaders := make([]int32, len(t.Partitions))
		for i := range leaders {
			leaders[i] = -1
		}
		for _, part := range t.Partitions {
			if int(part.PartitionIndex) < len(leaders) {
				leaders[part.PartitionIndex] = part.LeaderID
			}
		}
		return leaders, nil
	}
	return nil, fmt.Errorf("topic %s: %w", topic, kafkago.UnknownTopicOrPartition)
}

// enqueue queues pd for its broker, and returns the broker's queue, for
// the caller to dispatch. Called with p.mu held.
func (p *producer) enqueue(pd *pending, broker int32, now time.Time) *brokerQueue {
	b := p.brokers[broker]
	if b == nil {
		if p.brokers == nil {
			p.brokers = map[int32]*brokerQueue{}
		}
		b = &brokerQueue{parts: map[topicPartition]partBatch{}}
		p.brokers[broker] = b
	}
	if len(b.queue) == 0 {
		b.since = now
	}
	b.queue = append(b.queue, pd)
	b.count(pd, +1, p)
	return b
}

// count adds pd to (or, with -1, removes it from) the counts of its
// partition.
func (b *brokerQueue) count(pd *pending, sign int, p *producer) {
	k := topicPartition{pd.rec.Topic, pd.partition}
	pb := b.parts[k]
	was := pb.count >= p.batchSize || pb.bytes >= p.batchBytes
	pb.count += sign
	pb.bytes += sign * pd.size
	is := pb.count >= p.batchSize || pb.bytes >= p.batchBytes
	if pb.count == 0 {
		delete(b.parts, k)
	} else {
		b.parts[k] = pb
	}
	switch {
	case is && !was:
		b.full++
	case was && !is:
		b.full--
	}
}

// mayGo reports whether b's queue may be sent now: nothing is in flight to
// the broker, or a full batch waits, or the oldest record waited linger,
// or the producer is closing; and fewer than maxInFlight requests are in
// flight.
func (p *producer) mayGo(b *brokerQueue, now time.Time) bool {
	return len(b.queue) > 0 && b.inflight < maxInFlight &&
		(b.inflight == 0 || b.full > 0 || now.Sub(b.since) >= p.linger || p.closed)
}

// dispatch sends b's queue while it may go. Records left waiting behind a
// request arm the timer that looks at them again after linger. Called
// with p.mu held.
func (p *producer) dispatch(b *brokerQueue, now time.Time) {
	for p.mayGo(b, now) {
		batch := p.take(b, now)
		if len(batch) == 0 {
			break // every record was dropped, or waits for its key
		}
		b.inflight++
		p.busy++
		go p.send(b, batch)
	}
	if len(b.queue) > b.waiting && b.inflight < maxInFlight && b.timer == nil {
		b.timer = time.AfterFunc(p.linger-now.Sub(b.since), func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			b.timer = nil
			p.dispatch(b, time.Now())
		})
	}
	p.settle()
}

// settle closes p.idle once the producer is closed with nothing queued or
// in flight. Called with p.mu held.
func (p *producer) settle() {
	if p.closed && p.busy == 0 && p.idle != nil && p.empty() {
		close(p.idle)
		p.idle = nil
	}
}

// empty reports whether no record waits. Called with p.mu held.
func (p *producer) empty() bool {
	for _, b := range p.brokers {
		if len(b.queue) > 0 {
			return false
		}
	}
	return true
}

// take removes from b's queue the records of its next request: in order,
// up to batchSize records and batchBytes bytes per partition, and
// maxRequestBytes in all. Records of calls whose caller stopped waiting
// are dropped; records of a key held (see producer.held) stay queued.
// Called with p.mu held.
func (p *producer) take(b *brokerQueue, now time.Time) []*pending {
	var (
		batch []*pending
		rest  []*pending
		taken = map[topicPartition]partBatch{}
		total int
	)
	b.waiting = 0
	for _, pd := range b.queue {
		if pd.call.abandoned.Load() {
			b.count(pd, -1, p)
			continue
		}
		if p.isHeld(pd) {
			b.waiting++
			rest = append(rest, pd)
			continue
		}
		k := topicPartition{pd.rec.Topic, pd.partition}
		pb := taken[k]
		if pb.count > 0 && (pb.count >= p.batchSize || pb.bytes+pd.size > p.batchBytes) || total > 0 && total+pd.size > maxRequestBytes {
			rest = append(rest, pd)
			continue
		}
		taken[k] = partBatch{pb.count + 1, pb.bytes + pd.size}
		total += pd.size
		b.count(pd, -1, p)
		pd.sent = true
		batch = append(batch, pd)
	}
	b.queue = rest
	b.since = now
	return batch
}

// send writes batch to broker b, answers its records, and sends what may
// go next.
func (p *producer) send(b *brokerQueue, batch []*pending) {
	errs := p.request(context.Background(), batch)
	p.mu.Lock()
	defer p.mu.Unlock()
	released := false
	for k, pd := range batch {
		if p.unhold(pd) {
			released = true
		}
		pd.call.answer(pd.i, errs[k])
	}
	b.inflight--
	p.busy--
	if released {
		p.release(time.Now())
	} else {
		p.dispatch(b, time.Now())
	}
}

// request sends batch in one produce request, bounded by ctx and the
// producer's request timeout, and returns each record's outcome.
func (p *producer) request(ctx context.Context, batch []*pending) []error {
	req := &produceAPI.Request{Acks: int16(p.acks), Timeout: int32(p.timeout.Milliseconds())}
	for _, pd := range batch {
		ti := -1
		for k := range req.Topics {
			if req.Topics[k].Topic == pd.rec.Topic {
				ti = k
				break
			}
		}
		if ti < 0 {
			ti = len(req.Topics)
			req.Topics = append(req.Topics, produceAPI.RequestTopic{Topic: pd.rec.Topic})
		}
		t := &req.Topics[ti]
		pi := -1
		for k := range t.Partitions {
			if t.Partitions[k].Partition == pd.partition {
				pi = k
				break
			}
		}
		if pi < 0 {
			pi = len(t.Partitions)
			t.Partitions = append(t.Partitions, produceAPI.RequestPartition{
				Partition: pd.partition,
				RecordSet: protocol.RecordSet{Attributes: p.attributes, Records: &records{}},
			})
		}
		r := t.Partitions[pi].RecordSet.Records.(*records)
		r.recs = append(r.recs, pd.rec)
	}

	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	res, err := p.transport.RoundTrip(ctx, p.addr, req)
	errs := make([]error, len(batch))
	if err != nil || p.acks == kafkago.RequireNone {
		for k := range errs {
			errs[k] = err
		}
		return errs
	}
	answers := map[topicPartition]error{}
	for _, t := range res.(*produceAPI.Response).Topics {
		for _, part := range t.Partitions {
			answers[topicPartition{t.Topic, part.Partition}] = partitionError(part.ErrorCode, part.ErrorMessage)
		}
	}
	for k, pd := range batch {
		err, ok := answers[topicPartition{pd.rec.Topic, pd.partition}]
		if !ok {
			err = fmt.Errorf("topic %s partition %d: %w", pd.rec.Topic, pd.partition, errNoAnswer)
		}
		errs[k] = err
	}
	return errs
}

// errNoAnswer is the error of a record whose partition the broker's
// answer left out.
var errNoAnswer = errors.New("no answer in the produce response")

// partitionError is the error of a partition's answer, nil for none.
func partitionError(code int16, message string) error {
	switch {
	case code == 0:
		return nil
	case message == "":
		return kafkago.Error(code)
	}
	return fmt.Errorf("%w: %s", kafkago.Error(code), message)
}

// retryable reports whether a record that failed with err may succeed if
// sent again soon: a Kafka error the protocol calls retriable (a leader
// election, a replica behind), a leader the transport's metadata did not
// know, or a connection that broke.
func retryable(err error) bool {
	var temporary interface{ Temporary() bool }
	if errors.As(err, &temporary) && temporary.Temporary() {
		return true
	}
	var routing *produceAPI.Error
	return errors.As(err, &routing) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// close stops taking records, sends every queued one at once and waits
// until every request is answered, or ctx ends.
func (p *producer) close(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		p.idle = make(chan struct{})
		idle := p.idle
		for _, b := range p.brokers {
			p.dispatch(b, time.Now())
		}
		p.settle()
		p.mu.Unlock()
		select {
		case <-idle:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	p.mu.Unlock()
	return nil
}

// records reads the records of one partition of a request for kafka-go's
// encoder, handing over each record's slices as they are. The key and
// value readers are reused from one record to the next, as kafka-go's
// RecordReader contract allows.
type records struct {
	recs       []*kafkago.Message
	next       int
	rec        kafkago.Record
	key, value bytesReader
}

func (r *records) ReadRecord() (*kafkago.Record, error) {
	if r.next >= len(r.recs) {
		return nil, io.EOF
	}
	m := r.recs[r.next]
	r.next++
	r.rec = kafkago.Record{Time: m.Time, Headers: m.Headers}
	if m.Key != nil {
		r.key.b = m.Key
		r.rec.Key = &r.key
	}
	if m.Value != nil {
		r.value.b = m.Value
		r.rec.Value = &r.value
	}
	return &r.rec, nil
}

// bytesReader is a kafkago.Bytes over a slice it does not copy. kafka-go's
// encoder copies what it reads with WriteTo.
type bytesReader struct{ b []byte }

func (r *bytesReader) Len() int { return len(r.b) }

func (r *bytesReader) Read(b []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(b, r.b)
	r.b = r.b[n:]
	return n, nil
}

func (r *bytesReader) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(r.b)
	r.b = r.b[n:]
	return int64(n), err
}

func (r *bytesReader) Close() error { return nil }
