package sink

import "github.com/kubebus/bridge/wire"

// Message is the message a Sink publishes: wire.Message, the bridge's
// message format.
type Message = wire.Message
