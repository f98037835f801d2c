package replica

import (
	"fmt"
	"sync"
)

// watchCaps bound the watches served: all of them, and each user's (by
// authenticated name). A watch holds its place from when it is taken until
// it is released, whatever ends it. All methods may be called
// concurrently.
type watchCaps struct {
	max, perUser int

	mu    sync.Mutex
	total int
	users map[string]int
}

func newWatchCaps(max, perUser int) *watchCaps {
	return &watchCaps{max: max, perUser: perUser, users: map[string]int{}}
}

// capError says which cap a watch was refused by; cap is the metric's
// label, "total" or "per_user".
type capError struct {
	cap string
	msg string
}

func (e *capError) Error() string { return e.msg }

// take holds a place for a watch of user; release gives it back, once. It
// fails with a *capError when a cap is reached.
func (c *watchCaps) take(user string) (release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.total >= c.max {
		return nil, &capError{cap: "total", msg: fmt.Sprintf(
			"this replica serves at most %d watches at once (REPLICA_MAX_WATCHES), and serves that many; try again later", c.max)}
	}
	if c.users[user] >= c.perUser {
		return nil, &capError{cap: "per_user", msg: fmt.Sprintf(
			"this replica serves at most %d watches at once per user (REPLICA_MAX_WATCHES_PER_USER), and user %q has that many; end one, or try again later", c.perUser, truncate(user, 253))}
	}
	c.total++
	c.users[user]++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.total--
			if c.users[user]--; c.users[user] == 0 {
				delete(c.users, user)
			}
		})
	}, nil
}
