package controlplane

import (
	"fmt"
	"net"
)

// addrInUse is the text a process logs when it cannot bind its port; seeing
// it in the output of a process that exited during start-up means another
// process took the port between freePorts and the bind, so try again.
const addrInUse = "address already in use"

// freePorts returns n distinct TCP ports that were free on 127.0.0.1 a
// moment ago. All listeners are held until every port is picked so that
// the ports differ; they are closed before returning, so a port can still
// be taken before the child binds it (callers retry on addrInUse).
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("controlplane: finding a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
