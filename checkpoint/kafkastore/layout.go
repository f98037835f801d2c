package kafkastore

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/kubebus/bridge/checkpoint"
)

// objectKey is the record key of an object: "<resource>/<key>".
func objectKey(resource, key string) []byte {
	return []byte(resource + "/" + key)
}

// resourceKey is the record key of a resource's own record.
func resourceKey(resource string) []byte {
	return []byte(resource)
}

// resourceValue is the value of a resource's own record.
type resourceValue struct {
	LastResourceVersion string `json:"lastResourceVersion"`
}

// parsed is one record read back from the topic.
type parsed struct {
	resource string
	key      string // "" for a resource's own record
	deleted  bool   // a tombstone
	pos      checkpoint.Position
	last     string
}

// parse decodes a record of the topic.
func parse(key, value []byte) (parsed, error) {
	if len(key) == 0 {
		return parsed{}, errors.New("record without a key")
	}
	resource, objKey, isObject := strings.Cut(string(key), "/")
	p := parsed{resource: resource, key: objKey, deleted: value == nil}
	switch {
	case resource == "" || isObject && objKey == "":
		return parsed{}, fmt.Errorf("key %q is neither <resource> nor <resource>/<object>", key)
	case value == nil:
		if !isObject {
			return parsed{}, fmt.Errorf("key %q: tombstone for a resource record", key)
		}
	case isObject:
		pos, err := checkpoint.DecodePosition(value)
		if err != nil {
			return parsed{}, fmt.Errorf("key %q: %w", key, err)
		}
		p.pos = pos
	default:
		var v resourceValue
		if err := json.Unmarshal(value, &v); err != nil {
			return parsed{}, fmt.Errorf("key %q: decode resource record: %w", key, err)
		}
		p.last = v.LastResourceVersion
	}
	return p, nil
}
