package rawobject

// Tree is a set of paths, merged by their common steps, for Extract and
// Project. It is read-only once made: safe for concurrent use.
type Tree struct{ root node }

// node is where a tree's paths reach after the same steps.
type node struct {
	// key is the name of the step that leads here.
	key string
	// leaf is set when a path ends here: everything below is selected,
	// and names and each are nil.
	leaf bool
	// names are the nodes one name step further.
	names map[string]*node
	// each is the node one Each step further.
	each *node
}

// NewTree is the tree of paths. A path of no steps is the whole object.
// No paths make a tree that selects nothing.
func NewTree(paths []Path) *Tree {
	t := &Tree{}
	for _, p := range paths {
		t.root.add(p)
	}
	return t
}

func (n *node) add(p Path) {
	for _, st := range p {
		if n.leaf {
			return // a shorter path selects all of this already
		}
		if st.Each {
			if n.each == nil {
				n.each = &node{}
			}
			n = n.each
			continue
		}
		next := n.names[st.Name]
		if next == nil {
			if n.names == nil {
				n.names = make(map[string]*node)
			}
			next = &node{key: st.Name}
			n.names[st.Name] = next
		}
		n = next
	}
	*n = node{key: n.key, leaf: true}
}

// name is the node one name step from n, when n is not nil.
func (n *node) name(k []byte) *node {
	if n == nil {
		return nil
	}
	return n.names[string(k)]
}

// whole is n, or nil when n is a leaf: nil stands for "everything below"
// where a node is followed.
func whole(n *node) *node {
	if n != nil && n.leaf {
		return nil
	}
	return n
}
