package controlplane

import (
	"bytes"
	"strings"
	"testing"
)

func TestLineWriterPrefixesWholeLines(t *testing.T) {
	var out bytes.Buffer
	shared := &syncWriter{w: &out}
	a := &lineWriter{prefix: "a: ", out: shared}
	b := &lineWriter{prefix: "b: ", out: shared}
	_, _ = a.Write([]byte("one "))
	_, _ = b.Write([]byte("x\ny"))
	_, _ = a.Write([]byte("two\nthree"))
	_ = a.flush()
	_ = b.flush()
	want := "b: x\na: one two\na: three\nb: y\n"
	if out.String() != want {
		t.Errorf("got %q, want %q", out.String(), want)
	}
}

func TestTailBufferLastLines(t *testing.T) {
	var tb tailBuffer
	if got := tb.lastLines(2); got != "(no output)\n" {
		t.Errorf("empty: got %q", got)
	}
	_, _ = tb.Write([]byte("1\n2\n3\n"))
	if got := tb.lastLines(2); got != "2\n3\n" {
		t.Errorf("lastLines(2) = %q", got)
	}
	if got := tb.lastLines(10); got != "1\n2\n3\n" {
		t.Errorf("lastLines(10) = %q", got)
	}
	_, _ = tb.Write([]byte(strings.Repeat("x", 3*tailBytes) + "\nend\n"))
	if len(tb.buf) > 2*tailBytes || !tb.contains("end") {
		t.Errorf("buffer kept %d bytes, want at most %d ending in the latest output", len(tb.buf), 2*tailBytes)
	}
}
