package access

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
)

// AuthnConfig says which credentials the replica accepts. At least one of
// ClientCAFile and TokenFile is required; there is no anonymous access.
type AuthnConfig struct {
	// ClientCAFile is a PEM bundle of the CAs that sign client
	// certificates. A verified certificate's CommonName is the user, its
	// Organizations the groups, as kube-apiserver's --client-ca-file.
	ClientCAFile string
	// TokenFile holds bearer tokens in kube-apiserver's --token-auth-file
	// format: token,user,uid,"group1,group2".
	TokenFile string
	// Interval is how often Run reads the files to see if they changed;
	// zero means DefaultInterval.
	Interval time.Duration
	// Logger receives a line for each reload and each bad file; nil
	// discards them.
	Logger *slog.Logger
}

// Authenticator authenticates requests by client certificate, then by
// bearer token, with kube-apiserver's own authenticators. Every identity
// it returns is also in the group system:authenticated.
//
// The server's TLS config must ask for client certificates without
// verifying them (tls.RequestClientCert): the Authenticator verifies them,
// against the CA bundle as last read well, so that a new bundle applies
// to new requests without a restart. A certificate the bundle does not
// verify, an unknown token and a request with neither are not
// authenticated (401 from the WithAuthentication filter).
//
// Run reads both files again when they change; a bad new file is logged,
// naming it, and the last good content stays in use. AuthenticateRequest
// is safe for concurrent use, also while Run reloads.
type Authenticator struct {
	cfg     AuthnConfig
	log     *slog.Logger
	request authenticator.Request

	ca *dynamiccertificates.DynamicFileCAContent // nil without ClientCAFile

	tokenFile polledFile
	tokens    atomic.Pointer[tokenfile.TokenAuthenticator] // nil without TokenFile

	mu       sync.Mutex
	reported map[string]string // file -> the error last logged for it
}

var _ authenticator.Request = (*Authenticator)(nil)

// NewAuthenticator reads the files cfg names. A file that cannot be read
// or parsed is an error that names it.
func NewAuthenticator(cfg AuthnConfig) (*Authenticator, error) {
	if cfg.ClientCAFile == "" && cfg.TokenFile == "" {
		return nil, errors.New("access: no client CA file and no token file: at least one is required, since nothing is served anonymously")
	}
	a := &Authenticator{cfg: cfg, log: cfg.Logger, reported: map[string]string{}}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	var chain []authenticator.Request
	if cfg.ClientCAFile != "" {
		ca, err := dynamiccertificates.NewDynamicCAContentFromFile("client-ca", cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("access: client CA file %s: %w", cfg.ClientCAFile, err)
		}
		a.ca = ca
		chain = append(chain, x509request.NewDynamic(ca.VerifyOptions, x509request.CommonNameUserConversion))
	}
	if cfg.TokenFile != "" {
		a.tokenFile = polledFile{path: cfg.TokenFile}
		data, _, err := a.tokenFile.read()
		if err != nil {
			return nil, fmt.Errorf("access: token file: %w", err)
		}
		tokens, err := parseTokens(data, cfg.TokenFile)
		if err != nil {
			return nil, err
		}
		a.tokenFile.seen(data)
		a.tokens.Store(tokens)
		chain = append(chain, bearertoken.New(authenticator.TokenFunc(func(ctx context.Context, token string) (*authenticator.Response, bool, error) {
			return a.tokens.Load().AuthenticateToken(ctx, token)
		})))
	}
	a.request = group.NewAuthenticatedGroupAdder(union.New(chain...))
	return a, nil
}

// AuthenticateRequest returns the request's identity, and whether it has
// one.
func (a *Authenticator) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	return a.request.AuthenticateRequest(r)
}

// Run reads the client CA file and the token file every Interval, and
// puts a changed file's content in use if it is good. It returns nil when
// ctx ends.
func (a *Authenticator) Run(ctx context.Context) error {
	return every(ctx, intervalOrDefault(a.cfg.Interval), func() {
		if a.ca != nil {
			a.reloadCA(ctx)
		}
		if a.tokens.Load() != nil {
			a.reloadTokens()
		}
	})
}

func (a *Authenticator) reloadCA(ctx context.Context) {
	before := a.ca.CurrentCABundleContent()
	// RunOnce reads the file, and keeps the bundle it had if the new one
	// is empty or holds no certificate.
	err := a.ca.RunOnce(ctx)
	if err != nil {
		err = fmt.Errorf("access: client CA file %s: %w", a.cfg.ClientCAFile, err)
	}
	a.report(a.cfg.ClientCAFile, err, !bytes.Equal(before, a.ca.CurrentCABundleContent()))
}

func (a *Authenticator) reloadTokens() {
	data, changed, err := a.tokenFile.read()
	if err != nil {
		a.report(a.cfg.TokenFile, fmt.Errorf("access: token file: %w", err), false)
		return
	}
	if !changed {
		a.report(a.cfg.TokenFile, nil, false)
		return
	}
	a.tokenFile.seen(data)
	tokens, err := parseTokens(data, a.cfg.TokenFile)
	if err == nil {
		a.tokens.Store(tokens)
	}
	a.report(a.cfg.TokenFile, err, err == nil)
}

// report logs a reload, or an error once until it changes, so that a bad
// file is not logged on every tick.
func (a *Authenticator) report(file string, err error, reloaded bool) {
	a.mu.Lock()
	last := a.reported[file]
	now := ""
	if err != nil {
		now = err.Error()
	}
	a.reported[file] = now
	a.mu.Unlock()
	switch {
	case err != nil && now != last:
		a.log.Error("access: keeping the last good content", "file", file, "err", err)
	case reloaded:
		a.log.Info("access: reloaded", "file", file)
	}
}
