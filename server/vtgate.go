package server

import (
	"fmt"
	"sync"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"vitess.io/vitess/go/vt/grpcclient"
	"vitess.io/vitess/go/vt/vtgate/grpcvtgateconn"

	"github.com/vstream-gateway/vstream-gateway/source"
)

// tlsMu guards the vtgate TLS settings, which are process-wide.
var tlsMu sync.Mutex

// vtgateOptions returns the source options that secure the vtgate
// connection.
//
// TLS goes through grpcvtgateconn's own settings rather than a dial option
// of ours: its dialer appends its transport credentials after the caller's
// (plaintext when unset), so ours would be overridden. Those settings are
// process-wide flags, set here through the package's RegisterFlags.
//
// Static auth uses vitess's StaticAuthClientCreds: per-RPC metadata
// "username" and "password", which vtgate's static auth plugin
// (--grpc_auth_mode=static) checks.
func vtgateOptions(cfg *Config) ([]source.Option, error) {
	var opts []source.Option
	if cfg.VtgateCA != "" || cfg.VtgateCert != "" || cfg.VtgateServerName != "" {
		tlsMu.Lock()
		defer tlsMu.Unlock()
		fs := pflag.NewFlagSet("vtgate-grpc", pflag.ContinueOnError)
		grpcvtgateconn.RegisterFlags(fs)
		for name, v := range map[string]string{
			"vtgate-grpc-ca":          cfg.VtgateCA,
			"vtgate-grpc-cert":        cfg.VtgateCert,
			"vtgate-grpc-key":         cfg.VtgateKey,
			"vtgate-grpc-server-name": cfg.VtgateServerName,
		} {
			if err := fs.Set(name, v); err != nil {
				return nil, fmt.Errorf("vtgate TLS %s: %w", name, err)
			}
		}
	}
	if cfg.VtgateUser != "" {
		creds := &grpcclient.StaticAuthClientCreds{Username: cfg.VtgateUser, Password: cfg.VtgatePassword}
		opts = append(opts, source.WithDialOptions(grpc.WithPerRPCCredentials(creds)))
	}
	return opts, nil
}
