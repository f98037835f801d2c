package wire

import (
	"bytes"
	"encoding/json"
	"testing"
)

// encode gives m its encoding as an encoder writes it: the whole event in
// one buffer, with Data its sub-slice.
func encode(m *Message) {
	b := m.AppendHead(make([]byte, 0, m.HeadLen()+len(m.Data)+1))
	start := len(b)
	b = append(append(b, m.Data...), '}')
	m.Encoded, m.Data = b, b[start:len(b)-1:len(b)-1]
}

// A message that holds its encoding hands it out as it is, without
// copying; one whose Data no longer is part of it (a copy given other
// data) is encoded afresh.
func TestMarshalJSONReturnsTheEncoding(t *testing.T) {
	for _, m := range []*Message{namespacedMessage(), clusterScopedMessage(), omittedMessage()} {
		plain, _ := m.MarshalJSON()
		encode(m)
		if !bytes.Equal(m.Encoded, plain) {
			t.Fatalf("AppendHead, data and a brace\n got %s\nwant %s", m.Encoded, plain)
		}
		got, _ := m.MarshalJSON()
		if &got[0] != &m.Encoded[0] || len(got) != len(m.Encoded) {
			t.Errorf("%s: MarshalJSON copied the encoding", m.ID)
		}

		c := *m
		c.Data = json.RawMessage(`{"object":{"replaced":true}}`)
		got, _ = c.MarshalJSON()
		if !bytes.Contains(got, []byte(`"data":{"object":{"replaced":true}}}`)) || &got[0] == &m.Encoded[0] {
			t.Errorf("%s: a copy with other data is sent with the original's encoding: %s", m.ID, got)
		}

		c = *m
		c.Data = nil
		if got, _ = c.MarshalJSON(); !bytes.HasSuffix(got, []byte(`"data":null}`)) {
			t.Errorf("%s: a copy without data: %s", m.ID, got)
		}

		c = *m
		c.Data = bytes.Clone(m.Data) // equal bytes, another buffer
		if got, _ = c.MarshalJSON(); !bytes.Equal(got, plain) || &got[0] == &m.Encoded[0] {
			t.Errorf("%s: a copy with a copy of the data: %s", m.ID, got)
		}
	}
}
