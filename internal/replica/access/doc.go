// Package access decides who may read what from the replica: who a
// request comes from (authentication) and whether that identity may make
// it (authorization), with k8s.io/apiserver's authenticators and the
// authorizer interface its filters call.
//
// What it guarantees:
//   - Nothing anonymous. [NewAuthenticator] accepts client certificates
//     verified against a CA bundle, bearer tokens from a kube-apiserver
//     token file, or both; a request with neither is not authenticated.
//   - Nothing without a grant. [Rules] allows a request only when a rule
//     of the rules file names its identity (user or group), cluster, verb,
//     resource, namespace and name. An identity with no grant on a cluster
//     is denied everything on it, discovery included. Secrets are served
//     only where a rule names them: no wildcard covers them. Only get,
//     list and watch are ever allowed.
//   - Bad input is refused with an error that names the file and the field
//     (grants[0].rules[1].verbs[2]) or line at fault; nothing in a file
//     panics. Errors, logs and decisions' reasons never hold a token.
//   - Files are read again when they change ([RulesFile.Run],
//     [Authenticator.Run]); a bad new content is logged and the last good
//     one stays in use, so that a typo in a Secret never opens or closes
//     the replica. Only the first read's failure is fatal.
//
// The server puts each request's cluster in its context ([WithCluster])
// before the authorization filter runs: a cluster's name for
// /clusters/<name>/..., [AllClusters] for /clusters/*/..., and narrows an
// all-clusters answer with [Rules.Scope]. docs/replica-access.md describes
// the rules file for operators.
package access
