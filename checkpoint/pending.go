package checkpoint

import (
	"cmp"
	"slices"
)

// pendingSet holds the newest pending record of each (Resource, Key), one
// slot per key, with the number of its arrival. A record replaces that of
// its key in its slot, so the set holds as many slots as it has objects,
// however often each changes. The slots are in order of arrival until a
// record replaces one that is not the last; only then does take sort.
type pendingSet struct {
	recs []Record
	seqs []uint64 // the arrival of each record in recs
	// index is the slot of each key's record.
	index map[pendingKey]int
	// unordered: a record replaced one before the last slot, so the slots
	// are no longer in order of arrival.
	unordered bool
}

func newPendingSet(hint int) *pendingSet {
	return &pendingSet{
		recs:  make([]Record, 0, hint),
		seqs:  make([]uint64, 0, hint),
		index: make(map[pendingKey]int, hint),
	}
}

// len is the number of records.
func (s *pendingSet) len() int { return len(s.recs) }

// add sets r, which arrived as number seq, later than every record in s,
// as the record of its key. r is valid.
func (s *pendingSet) add(r *Record, seq uint64) {
	k := pendingKey{r.Resource, r.Key}
	if i, ok := s.index[k]; ok {
		s.recs[i], s.seqs[i] = *r, seq
		if i != len(s.recs)-1 {
			s.unordered = true
		}
		return
	}
	s.index[k] = len(s.recs)
	s.recs = append(s.recs, *r)
	s.seqs = append(s.seqs, seq)
}

// take returns the records in the order they arrived and empties s. The
// records returned may share s's memory: s must not be added to while
// they are in use.
func (s *pendingSet) take() []Record {
	recs := s.recs
	if s.unordered {
		perm := make([]int32, len(recs))
		for i := range perm {
			perm[i] = int32(i)
		}
		slices.SortFunc(perm, func(a, b int32) int { return cmp.Compare(s.seqs[a], s.seqs[b]) })
		sorted := make([]Record, len(recs))
		for i, j := range perm {
			sorted[i] = recs[j]
		}
		clear(recs)
		recs = sorted
	}
	clear(s.index)
	s.recs, s.seqs, s.unordered = s.recs[:0], s.seqs[:0], false
	return recs
}
