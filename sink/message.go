package sink

import "github.com/kubebus/bridge/wire"

// Message is wire.Message.
//
// Deprecated: transitional; use wire.Message.
type Message = wire.Message
