package checkpoint

import "testing"

func TestLaterResourceVersion(t *testing.T) {
	tests := []struct {
		name, cur, next, want string
	}{
		{"first", "", "5", "5"},
		{"numeric higher", "9", "10", "10"},
		{"numeric lower keeps current", "10", "9", "10"},
		{"numeric equal", "10", "10", "10"},
		{"leading zeros are not comparable, next wins", "10", "009", "009"},
		{"zero is not comparable, next wins", "10", "0", "0"},
		{"beyond int64", "9223372036854775808", "18446744073709551615", "18446744073709551615"},
		{"beyond uint64, lower keeps current", "18446744073709551617", "18446744073709551616", "18446744073709551617"},
		{"empty next keeps current", "10", "", "10"},
		{"both empty", "", "", ""},
		{"opaque next wins", "10", "abc", "abc"},
		{"opaque current, numeric next wins", "abc", "5", "5"},
		{"both opaque, newer wins", "b", "a", "a"},
		{"negative is not numeric", "10", "-1", "-1"},
		{"beyond uint64 is higher", "10", "18446744073709551616", "18446744073709551616"},
		{"lower than beyond uint64 keeps current", "18446744073709551616", "10", "18446744073709551616"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LaterResourceVersion(tt.cur, tt.next); got != tt.want {
				t.Errorf("LaterResourceVersion(%q, %q) = %q, want %q", tt.cur, tt.next, got, tt.want)
			}
		})
	}
}
