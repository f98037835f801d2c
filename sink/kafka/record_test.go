package kafka

import (
	"maps"
	"reflect"
	"testing"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/kubebus/bridge/wire"
)

func TestEncodeDecode(t *testing.T) {
	cm := message(configmaps, "ns", "a", "updated", 42)
	cm.Snapshot = true
	ns := message(configmaps, "", "cluster-wide", "deleted", 7)
	omitted := message(configmaps, "ns", "huge", "deleted", 9)
	omitted.ContentOmitted = true
	left := message(configmaps, "ns", "left", "deleted", 11)
	left.Reason = "left-filter"
	tests := []struct {
		mode    CEMode
		msg     *wire.Message
		headers map[string]string // must be present with these values
		absent  []string
	}{
		{ModeStructured, cm, map[string]string{
			"content-type": "application/cloudevents+json; charset=UTF-8", "ce_id": cm.ID,
			"ce_type": "io.kubebus.object.updated", "ce_resourceversion": "42",
		}, []string{"ce_specversion", "ce_source"}},
		{ModeBinary, cm, map[string]string{
			"content-type": "application/json", "ce_specversion": "1.0", "ce_id": cm.ID, "ce_source": cm.Source,
			"ce_type": "io.kubebus.object.updated", "ce_subject": "ns/a", "ce_time": "2026-11-21T05:12:31.512904127Z",
			"ce_resourceversion": "42", "ce_uid": "uid-ns/a", "ce_kind": "ConfigMap", "ce_apiversion": "v1",
			"ce_namespace": "ns", "ce_name": "a", "ce_cluster": "test", "ce_snapshot": "true",
		}, nil},
		{ModeBinary, ns, map[string]string{"ce_type": "io.kubebus.object.deleted", "ce_resourceversion": "7", "ce_snapshot": "false"},
			[]string{"ce_namespace", "ce_contentomitted", "ce_reason"}},
		{ModeStructured, cm, nil, []string{"ce_reason"}},
		{ModeStructured, omitted, map[string]string{"ce_contentomitted": "true"}, nil},
		{ModeBinary, omitted, map[string]string{"ce_contentomitted": "true"}, nil},
		{ModeStructured, left, map[string]string{"ce_reason": "left-filter", "ce_type": "io.kubebus.object.deleted"}, nil},
		{ModeBinary, left, map[string]string{"ce_reason": "left-filter", "ce_type": "io.kubebus.object.deleted"}, nil},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode)+"/"+tt.msg.Subject, func(t *testing.T) {
			s := &Sink{cfg: settings(t, map[string]string{"BRIDGE_KAFKA_BROKERS": "k:9092", "BRIDGE_KAFKA_CE_MODE": string(tt.mode)})}
			rec, err := s.encode(tt.msg, "kube.configmaps", []byte(tt.msg.Key()))
			if err != nil {
				t.Fatal(err)
			}
			headers := map[string]string{}
			for _, h := range rec.Headers {
				if _, dup := headers[h.Key]; dup {
					t.Errorf("header %s twice", h.Key)
				}
				headers[h.Key] = string(h.Value)
			}
			for k, v := range tt.headers {
				if headers[k] != v {
					t.Errorf("header %s = %q, want %q", k, headers[k], v)
				}
			}
			for _, k := range tt.absent {
				if _, ok := headers[k]; ok {
					t.Errorf("header %s present, want none", k)
				}
			}
			if tt.mode == ModeBinary && string(rec.Value) != string(tt.msg.Data) {
				t.Errorf("binary value = %s, want the data %s", rec.Value, tt.msg.Data)
			}
			got, err := wire.Kafka.Decode(rec.Value, headerSeq(rec.Headers))
			if err != nil {
				t.Fatal(err)
			}
			want := *tt.msg
			want.Time = want.Time.UTC()
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("decoded:\n got %+v\nwant %+v", *got, want)
			}
		})
	}
}

func TestDecodeTombstoneAndGarbage(t *testing.T) {
	if m, err := wire.Kafka.Decode(nil, nil); m != nil || err != nil {
		t.Errorf("tombstone decodes to %v, %v; want nil, nil", m, err)
	}
	if _, err := wire.Kafka.Decode([]byte(`{}`), maps.All(map[string]string{"content-type": "application/json"})); err == nil {
		t.Error("a record that is no CloudEvent decodes without error")
	}
	if _, err := wire.Kafka.Decode([]byte(`{}`), maps.All(map[string]string{"ce_specversion": "1.0", "ce_snapshot": "maybe"})); err == nil {
		t.Error("a bad ce_snapshot decodes without error")
	}
}

func TestRecordSize(t *testing.T) {
	rec := kafkago.Message{Key: []byte("ns/a"), Value: make([]byte, 1000), Headers: []kafkago.Header{{Key: "ce_type", Value: []byte("x")}}}
	// 22 fixed, key 4, value 1000, one header: count 1, name 1+7, value 1+1.
	if got, want := recordSize(&rec), 22+4+1000+1+8+2; got != want {
		t.Errorf("recordSize = %d, want %d", got, want)
	}
	m := message(configmaps, "ns", "a", "deleted", 3)
	m.Cluster, m.Source, m.UID = "c", "/clusters/c/api/v1/configmaps", "u"
	tomb := tombstone("t", []byte("ns/a"), m)
	// 22 fixed, key 4, three headers: count 1, ce_cluster 1+10 1+1,
	// ce_source 1+9 1+29, ce_uid 1+6 1+1.
	if got, want := recordSize(&tomb), 22+4+1+(11+2)+(10+30)+(7+2); got != want {
		t.Errorf("recordSize(tombstone) = %d, want %d", got, want)
	}
}
