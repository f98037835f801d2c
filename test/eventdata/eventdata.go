// Package eventdata reads what the data of the bridge's events carry, for
// tests that check it: decoded with encoding/json, independently of the
// bridge's own scanners, so that a test does not trust the code it tests.
package eventdata

import "encoding/json"

// ObjectResourceVersion is the resourceVersion of the object an event's
// data ({"object":{...}}) carries: empty when the object has none, and an
// error when data is not JSON.
func ObjectResourceVersion(data []byte) (string, error) {
	var d struct {
		Object struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
		} `json:"object"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return "", err
	}
	return d.Object.Metadata.ResourceVersion, nil
}
