package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"vitess.io/vitess/go/vt/vtgate/grpcvtgateconn"

	"github.com/vstream-gateway/vstream-gateway/source"
)

// TestVtgateTLSAndStaticAuth dials a TLS gRPC server standing in for vtgate
// and checks the handshake verified its certificate against --vtgate-ca
// and --vtgate-server-name, and that every RPC carried the static auth
// credentials as vtgate's static auth plugin reads them.
func TestVtgateTLSAndStaticAuth(t *testing.T) {
	dir := t.TempDir()
	caFile, serverCert := testCA(t, dir, "vtgate.test")
	got := make(chan metadata.MD, 4)
	srv := grpc.NewServer(
		grpc.Creds(credentials.NewServerTLSFromCert(&serverCert)),
		grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
			md, _ := metadata.FromIncomingContext(stream.Context())
			got <- md
			return status.Error(codes.Unimplemented, "test server")
		}),
	)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Stop()
	t.Cleanup(resetVtgateTLS)

	opts, err := vtgateOptions(&Config{VtgateCA: caFile, VtgateServerName: "vtgate.test", VtgateUser: "gw", VtgatePassword: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := source.Dial(ctx, l.Addr().String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Conn().Session("", nil).Execute(ctx, "select 1 from dual", nil, false)
	if !reachedTestServer(err) {
		t.Fatalf("RPC over TLS: %v, want the test server's Unimplemented", err)
	}
	md := <-got
	if u, p := md.Get("username"), md.Get("password"); len(u) != 1 || u[0] != "gw" || len(p) != 1 || p[0] != "s3cret" {
		t.Errorf("static auth metadata %v", md)
	}

	// The wrong server name fails the handshake: the certificate is checked.
	resetVtgateTLS()
	opts, _ = vtgateOptions(&Config{VtgateCA: caFile, VtgateServerName: "other.test"})
	c2, err := source.Dial(ctx, l.Addr().String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
	defer scancel()
	if _, err := c2.Conn().Session("", nil).Execute(sctx, "select 1 from dual", nil, false); reachedTestServer(err) {
		t.Error("handshake with the wrong server name succeeded")
	}
}

// reachedTestServer: the RPC got through TLS to the handler (vitess wraps
// the gRPC status in its own error, so its text is what is left).
func reachedTestServer(err error) bool {
	return err != nil && strings.Contains(err.Error(), "test server")
}

func resetVtgateTLS() {
	fs := pflag.NewFlagSet("reset", pflag.ContinueOnError)
	grpcvtgateconn.RegisterFlags(fs)
	for _, n := range []string{"vtgate-grpc-ca", "vtgate-grpc-cert", "vtgate-grpc-key", "vtgate-grpc-server-name"} {
		fs.Set(n, "")
	}
}

// testCA writes a CA certificate to dir and returns its file and a server
// certificate for host signed by it.
func testCA(t *testing.T, dir, host string) (string, tls.Certificate) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host}, DNSNames: []string{host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(dir, "ca.pem")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600)
	return caFile, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
