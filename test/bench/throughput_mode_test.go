package bench

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kubebus/bridge/test/kafkatest"
	"github.com/kubebus/bridge/test/natstest"
	"github.com/kubebus/bridge/wire"
)

// modeScenario names the figures of BenchmarkThroughputMode.
const modeScenario = "Pipeline throughput by content mode"

// modeBus publishes a workload through the bridge to a new server of one
// bus, in a content mode ("structured" or "binary").
type modeBus struct {
	name string
	// bridge publishes wl in mode and, with verify, checks that what the
	// bus holds decodes to the messages the encoder made.
	bridge func(b *testing.B, wl *workload, mode string, verify bool) runResult
	// size is the bytes one message takes on the bus in mode: its body
	// (value) and its headers, names and values.
	size func(b *testing.B, m *wire.Message, mode string) int
}

// BenchmarkThroughputMode measures the bridge in binary mode next to the
// bridge in structured mode (the default), on each bus and each workload of
// the throughput scenario, in the same run: the pipeline, the sink and an
// in-process server, from the first delta handed over to the last ack and
// the checkpoint flushed.
// Both modes publish the encoder's buffer as it is (the whole event, or its
// data, a part of it); binary mode writes every attribute as a header of
// its own.
func BenchmarkThroughputMode(b *testing.B) {
	for _, bus := range []modeBus{
		{name: "NATS JetStream", bridge: natsModeBridge, size: natsModeSize},
		{name: "Kafka", bridge: kafkaModeBridge, size: kafkaModeSize},
	} {
		for _, w := range throughputWorkloads {
			b.Run(bus.name+"/"+w.kind, func(b *testing.B) {
				wl := buildWorkload(b, w.kind+" "+w.size, w.resource, w.count, w.object)
				measureModes(b, bus, wl)
			})
		}
	}
}

func measureModes(b *testing.B, bus modeBus, wl *workload) {
	n := float64(len(wl.msgs))
	run := func(name string, side func(b *testing.B) runResult) runResult { return measuredRun(b, name, n, side) }
	in := func(mode string) func(b *testing.B) runResult {
		return func(b *testing.B) runResult { return bus.bridge(b, wl, mode, false) }
	}
	// The warm-ups check what each mode publishes.
	run("warm-up-binary", func(b *testing.B) runResult { return bus.bridge(b, wl, "binary", true) })
	run("warm-up-structured", func(b *testing.B) runResult { return bus.bridge(b, wl, "structured", true) })
	binaryRuns, structuredRuns := alternate(run, "binary-", in("binary"), "structured-", in("structured"),
		func(_, _ []runResult) bool { return false })
	if b.Failed() {
		return
	}
	var binarySize, structuredSize float64
	for _, m := range wl.msgs {
		binarySize += float64(bus.size(b, m, "binary"))
		structuredSize += float64(bus.size(b, m, "structured"))
	}
	binarySize, structuredSize = binarySize/n, structuredSize/n
	name := bus.name + ", " + wl.name
	binaryCPU, structuredCPU := cpusPerMsg(n, binaryRuns), cpusPerMsg(n, structuredRuns)
	c := Figure{
		Scenario:     modeScenario,
		Name:         name + ", CPU per message",
		Row:          name,
		Order:        0,
		Unit:         "µs/msg",
		Bridge:       median(binaryCPU),
		Baseline:     median(structuredCPU),
		BaselineName: "the bridge in structured mode",
		Note: fmt.Sprintf("user and system CPU of the whole process (the in-process server included) per message, median of the same %d rounds (binary %s µs, structured %s µs)",
			len(binaryRuns), list1(binaryCPU), list1(structuredCPU)),
	}
	c.Spread(ratios(binaryCPU, structuredCPU))
	record(b, c)
	binaryRates, structuredRates := rates(n, binaryRuns), rates(n, structuredRuns)
	f := Figure{
		Scenario:     modeScenario,
		Name:         name,
		Row:          name,
		Order:        1,
		Unit:         "msg/s",
		Bridge:       median(binaryRates),
		Baseline:     median(structuredRates),
		BaselineName: "the bridge in structured mode",
		Note: fmt.Sprintf("the bridge in binary mode next to structured mode, its defaults otherwise; %d updates of distinct objects; median of %d alternating rounds, each run with a new server (binary %s msg/s, structured %s msg/s); "+
			"bytes per message on the bus, body and headers: binary %.0f, structured %.0f",
			len(wl.msgs), len(binaryRuns), list(binaryRates), list(structuredRates), binarySize, structuredSize),
	}
	f.Spread(ratios(binaryRates, structuredRates))
	record(b, f)
}

// natsModeBridge publishes wl through the bridge to a new NATS server in
// mode.
func natsModeBridge(b *testing.B, wl *workload, mode string, verify bool) runResult {
	b.Helper()
	srv := natstest.Start(b, natstest.Options{})
	defer srv.Shutdown()
	cfg := loadConfig(b, map[string]string{"BRIDGE_SINK": "nats", "BRIDGE_NATS_URL": srv.URL(), "BRIDGE_NATS_CE_MODE": mode})
	s := newNATSSink(b, cfg)
	r := runPipeline(b, cfg, s, wl.deltas, nil)
	if err := s.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	st := natsStream(b, srv, cfg, len(wl.msgs))
	if !verify {
		return r
	}
	tmpl, err := wire.ParseSubjectTemplate(cfg.NATS.SubjectLayout(), cfg.NATS.SubjectPrefix)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, i := range []int{0, len(wl.msgs) / 2, len(wl.msgs) - 1} {
		want := wl.msgs[i]
		subject, err := tmpl.Subject(want)
		if err != nil {
			b.Fatal(err)
		}
		got, err := st.GetLastMsgForSubject(ctx, subject)
		if err != nil {
			b.Fatalf("message %d on %s: %v", i, subject, err)
		}
		checkMode(b, mode, subject, got.Data, got.Header.Get(wire.NATS.HeaderOf("id")) != "", want)
		m, err := wire.NATS.Decode(got.Data, wire.Headers(got.Header))
		if err != nil {
			b.Fatalf("message %d on %s: %v", i, subject, err)
		}
		checkDecoded(b, subject, m, want)
	}
	return r
}

// kafkaModeBridge publishes wl through the bridge to a new Kafka cluster
// in mode.
func kafkaModeBridge(b *testing.B, wl *workload, mode string, verify bool) runResult {
	b.Helper()
	c := kafkatest.Start(b)
	cfg := loadConfig(b, map[string]string{"BRIDGE_SINK": "kafka", "BRIDGE_KAFKA_BROKERS": strings.Join(c.Addrs(), ","), "BRIDGE_KAFKA_CE_MODE": mode})
	s := newKafkaSink(b, cfg)
	r := runPipeline(b, cfg, s, wl.deltas, nil)
	if err := s.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	topic := cfg.Kafka.TopicOf(wl.msgs[0].Resource)
	checkKafkaCount(b, c, topic, len(wl.msgs))
	if !verify {
		return r
	}
	// The first record of a partition, and the message of its key.
	got := firstRecord(b, c, topic)
	headers := map[string][]string{}
	for _, h := range got.Headers {
		headers[h.Key] = append(headers[h.Key], string(h.Value))
	}
	for _, want := range wl.msgs {
		if cfg.Kafka.KeyOf(want) != string(got.Key) {
			continue
		}
		_, binary := headers[wire.Kafka.HeaderOf("specversion")]
		checkMode(b, mode, string(got.Key), got.Value, binary, want)
		m, err := wire.Kafka.Decode(got.Value, wire.Headers(headers))
		if err != nil {
			b.Fatalf("record %q: %v", got.Key, err)
		}
		checkDecoded(b, string(got.Key), m, want)
		return r
	}
	b.Fatalf("topic %s: no message has the key %q", topic, got.Key)
	return r
}

// checkMode fails unless body, of a message that carries its attributes
// as headers or not (binary), is what mode publishes of want: its data, or
// its whole event.
func checkMode(b *testing.B, mode, where string, body []byte, binary bool, want *wire.Message) {
	b.Helper()
	event, err := want.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	switch {
	case mode == "binary" && (!binary || !bytes.Equal(body, want.Data)):
		b.Fatalf("%s: in binary mode, the body is not the event's data, or the attributes are not headers", where)
	case mode == "structured" && (binary || !bytes.Equal(body, event)):
		b.Fatalf("%s: in structured mode, the body is not the whole event", where)
	}
}

// checkDecoded fails unless m, decoded from the bus, is the message the
// encoder made: the same id and data.
func checkDecoded(b *testing.B, where string, m, want *wire.Message) {
	b.Helper()
	if m.ID != want.ID || m.ResourceVersion != want.ResourceVersion || !bytes.Equal(m.Data, want.Data) {
		b.Fatalf("%s: decoded event %s (resourceversion %s), want %s (%s), or its data differs", where, m.ID, m.ResourceVersion, want.ID, want.ResourceVersion)
	}
}

// natsModeSize is the bytes of m's NATS message in mode, as the sink
// writes it with its defaults: body, and headers as "name: value\r\n".
func natsModeSize(b *testing.B, m *wire.Message, mode string) int {
	return modeSize(b, m, mode, wire.NATS, func(name, value string) int { return len(name) + len(value) + 4 },
		[]string{wire.NATSMsgIDHeader})
}

// kafkaModeSize is the bytes of m's Kafka record value and headers in
// mode, as the sink writes it with its defaults, without the framing.
func kafkaModeSize(b *testing.B, m *wire.Message, mode string) int {
	return modeSize(b, m, mode, wire.Kafka, func(name, value string) int { return len(name) + len(value) }, nil)
}

func modeSize(b *testing.B, m *wire.Message, mode string, binding *wire.Binding, header func(name, value string) int, always []string) int {
	b.Helper()
	n := 0
	for _, h := range always {
		n += header(h, m.ID)
	}
	add := func(name, value string) { n += header(name, value) }
	if mode == "binary" {
		binding.BinaryHeaders(m, add)
		return n + len(m.Data)
	}
	event, err := m.MarshalJSON()
	if err != nil {
		b.Fatal(err)
	}
	add(binding.ContentTypeHeader(), binding.StructuredContentType())
	// The identity headers a structured message carries in the state
	// layout, the default (on Kafka, in every layout).
	binding.IdentityHeaders(m, add)
	return n + len(event)
}
