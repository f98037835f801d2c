package wire

import "testing"

func TestPercentCoding(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain/text", "plain/text"},
		{`a "b" 100%`, "a%20%22b%22%20100%25"},
		{"Euro € 😀", "Euro%20%E2%82%AC%20%F0%9F%98%80"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := percentEncode(tc.in); got != tc.want {
				t.Fatalf("percentEncode = %q, want %q", got, tc.want)
			}
			if back, err := percentDecode(tc.want); err != nil || back != tc.in {
				t.Fatalf("percentDecode = %q, %v", back, err)
			}
		})
	}
	if got, err := percentDecode("%e2%82%ac"); err != nil || got != "€" {
		t.Errorf("lower-case digits: %q, %v", got, err)
	}
	for _, bad := range []string{"%C0%A0x%", "%zz", "%C0%A0"} {
		if _, err := percentDecode(bad); err == nil {
			t.Errorf("percentDecode(%q) passed", bad)
		}
	}
}
