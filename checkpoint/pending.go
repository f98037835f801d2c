package checkpoint

// pendingSet holds the newest pending record of each (Resource, Key), in
// the order they were recorded. A record that replaces another is
// appended and the other's slot cleared, so the slots are always in order
// of arrival and a flush needs no sort. Cleared slots are dropped once
// they outnumber the live ones, so a set holds at most about twice as many
// slots as it has objects, however often each changes.
type pendingSet struct {
	recs []Record // in order of arrival; a cleared slot has an empty Key
	// index is the slot of each key's record in recs.
	index map[pendingKey]int
}

// minCompact is how many slots a set may hold, whatever its number of
// live records, before its cleared slots are dropped.
const minCompact = 1024

func newPendingSet(hint int) *pendingSet {
	return &pendingSet{recs: make([]Record, 0, hint), index: make(map[pendingKey]int, hint)}
}

// len is the number of live records.
func (s *pendingSet) len() int { return len(s.index) }

// add appends r, which replaces any record of its key. r is valid.
func (s *pendingSet) add(r Record) {
	k := pendingKey{r.Resource, r.Key}
	if i, ok := s.index[k]; ok {
		s.recs[i] = Record{}
	}
	s.index[k] = len(s.recs)
	s.recs = append(s.recs, r)
	if len(s.recs) > minCompact && len(s.recs) > 2*len(s.index) {
		s.compact()
	}
}

// compact drops the cleared slots.
func (s *pendingSet) compact() {
	live := s.recs[:0]
	for _, r := range s.recs {
		if r.Key == "" {
			continue
		}
		s.index[pendingKey{r.Resource, r.Key}] = len(live)
		live = append(live, r)
	}
	clear(s.recs[len(live):])
	s.recs = live
}

// take returns the live records in the order they were recorded, and
// empties s. The records returned share s's memory until s is added to.
func (s *pendingSet) take() []Record {
	live := s.recs[:0]
	for _, r := range s.recs {
		if r.Key != "" {
			live = append(live, r)
		}
	}
	clear(s.recs[len(live):])
	clear(s.index)
	s.recs = s.recs[:0]
	return live
}
