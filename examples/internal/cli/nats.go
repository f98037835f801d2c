package cli

import (
	"fmt"

	"github.com/nats-io/nats.go"
)

// ConnectNATS connects to the NATS servers at url (comma-separated) under
// the client name name, with the credentials file creds when it is not
// empty. The connection reconnects for as long as it is open.
func ConnectNATS(url, creds, name string) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1)}
	if creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return nc, nil
}
