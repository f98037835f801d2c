package rawobject

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
)

// This file is the reference Extract and Project are held to: the same
// rules, applied to the maps encoding/json decodes.

// treeOf parses paths into a tree, nil for none.
func treeOf(tb testing.TB, paths string) *Tree {
	tb.Helper()
	ps, err := ParsePaths(paths)
	if err != nil {
		tb.Fatalf("ParsePaths(%q): %v", paths, err)
	}
	if ps == nil {
		return nil
	}
	return NewTree(ps)
}

// refExtract is Extract on v, decoded with UseNumber; numbers are left
// as json.Number (see convertNumbers).
func refExtract(v map[string]any, t *Tree) map[string]any {
	cutManagedFields(v)
	if t == nil {
		return map[string]any{}
	}
	if t.root.leaf {
		return v
	}
	out, _ := refAlong(v, &t.root)
	if out == nil {
		return map[string]any{} // the top level is always entered
	}
	return out.(map[string]any)
}

// refAlong is v along n, nil meaning all of it; ok is false when n
// cannot enter v.
func refAlong(v any, n *node) (any, bool) {
	if n == nil {
		return v, true
	}
	switch v := v.(type) {
	case map[string]any:
		if len(n.names) == 0 {
			return nil, false
		}
		out := map[string]any{}
		for k, c := range n.names {
			if val, ok := v[k]; ok {
				if r, ok := refAlong(val, whole(c)); ok {
					out[k] = r
				}
			}
		}
		return out, true
	case []any:
		if n.each == nil {
			return nil, false
		}
		out := []any{}
		for _, item := range v {
			if r, ok := refAlong(item, whole(n.each)); ok {
				out = append(out, r)
			}
		}
		return out, true
	}
	return nil, false
}

func cutManagedFields(v map[string]any) {
	if md, ok := v["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
	}
}

// convertNumbers turns the json.Numbers of v into what the unstructured
// decoder makes of them (k8s.io/apimachinery/pkg/util/json): int64 when
// it parses as one, else float64, an error when out of range.
func convertNumbers(v any) (any, error) {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i, nil
		}
		return v.Float64()
	case map[string]any:
		for k, val := range v {
			c, err := convertNumbers(val)
			if err != nil {
				return nil, err
			}
			v[k] = c
		}
	case []any:
		for k, val := range v {
			c, err := convertNumbers(val)
			if err != nil {
				return nil, err
			}
			v[k] = c
		}
	}
	return v, nil
}

var identityMeta = map[string]bool{"name": true, "namespace": true, "uid": true, "resourceVersion": true, "deletionTimestamp": true}

// refProject is Project on v, decoded with UseNumber.
func refProject(v map[string]any, p *Projection) map[string]any {
	var keep, drop *node
	if p.Keep != nil {
		keep = whole(&p.Keep.root)
	}
	if p.Drop != nil {
		drop = &p.Drop.root
	}
	out := map[string]any{}
	for k, val := range v {
		switch {
		case k == "apiVersion" || k == "kind":
			out[k] = val
		case k == "metadata":
			md, ok := val.(map[string]any)
			if !ok {
				if r, ok := refMember(k, val, keep, drop); ok {
					out[k] = r
				}
				continue
			}
			km := keep
			if keep != nil {
				if km = keep.names[k]; km == nil {
					km = &noNode
				}
			}
			dm := drop
			if drop != nil && !drop.leaf {
				dm = drop.names[k]
			}
			km = whole(km)
			outMD := map[string]any{}
			for mk, mval := range md {
				switch {
				case identityMeta[mk]:
					outMD[mk] = mval
				case mk == "managedFields" && !p.KeepManagedFields:
				default:
					if r, ok := refMember(mk, mval, km, dm); ok {
						outMD[mk] = r
					}
				}
			}
			out[k] = outMD
		default:
			if r, ok := refMember(k, val, keep, drop); ok {
				out[k] = r
			}
		}
	}
	return out
}

// refMember is the member k: val of an object projected along keep and
// drop; ok is false when it is left out.
func refMember(k string, val any, keep, drop *node) (any, bool) {
	var kc, dc *node
	if drop != nil {
		if drop.leaf {
			return nil, false
		}
		if dc = drop.names[k]; dc != nil && dc.leaf {
			return nil, false
		}
	}
	if keep != nil {
		if kc = keep.names[k]; kc == nil {
			return nil, false
		}
		kc = whole(kc)
	}
	return refValue(val, kc, dc)
}

func refValue(v any, kc, dc *node) (any, bool) {
	if kc == nil && dc == nil {
		return v, true
	}
	switch v := v.(type) {
	case map[string]any:
		if kc != nil && len(kc.names) == 0 {
			return nil, false
		}
		if kc == nil && len(dc.names) == 0 {
			return v, true
		}
		out := map[string]any{}
		for k, val := range v {
			if r, ok := refMember(k, val, kc, dc); ok {
				out[k] = r
			}
		}
		return out, true
	case []any:
		if kc != nil && kc.each == nil {
			return nil, false
		}
		if kc == nil && dc.each == nil {
			return v, true
		}
		var ki, di *node
		if kc != nil {
			ki = whole(kc.each)
		}
		if dc != nil {
			di = dc.each
		}
		out := []any{}
		for _, item := range v {
			if di != nil && di.leaf {
				continue
			}
			if r, ok := refValue(item, ki, di); ok {
				out = append(out, r)
			}
		}
		return out, true
	}
	if kc != nil {
		return nil, false
	}
	return v, true
}

// hasDuplicateKeys reports whether an object in data, valid JSON, has a
// key twice.
func hasDuplicateKeys(tb testing.TB, data []byte) bool {
	tb.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	type level struct {
		keys   map[string]bool
		object bool
		expect bool // the next string is a key
	}
	var stack []*level
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return false
		}
		if err != nil {
			tb.Fatalf("encoding/json: %v", err)
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.object && top.expect {
			if top.keys[s] {
				return true
			}
			top.keys[s] = true
			top.expect = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{keys: map[string]bool{}, object: true, expect: true})
			continue
		case json.Delim('['):
			stack = append(stack, &level{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		// A value ended: in an object, a key comes next.
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].expect = true
		}
	}
}
