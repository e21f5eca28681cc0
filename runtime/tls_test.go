package runtime

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

	"github.com/redis/go-redis/v9"
	"github.com/seqby/seqby/internal/redistest"
)

// testCA writes a fresh CA and a server certificate for 127.0.0.1 (PEM
// files in dir) and returns the CA's pool and the files' paths.
func testCA(t *testing.T, dir string) (roots *x509.CertPool, caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "seqby test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srv := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srv, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	roots = x509.NewCertPool()
	roots.AddCert(caCert)
	return roots, write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER), write("server.key", "EC PRIVATE KEY", keyDER)
}

// The engine and the publisher over TLS (rediss://): the server listens
// with TLS only, its certificate is checked against the test's CA, and a
// keyed handler applies every event in order.
func TestOverTLS(t *testing.T) {
	roots, caFile, certFile, keyFile := testCA(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, err := redistest.StartConfig(ctx, redistest.Config{
		TLS:  &tls.Config{RootCAs: roots},
		Args: []string{"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", caFile, "--tls-auth-clients", "no"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	opts, err := redis.ParseURL("rediss://" + srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	opts.TLSConfig.RootCAs = roots
	opts.ContextTimeoutEnabled = true
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })

	// Without the CA the handshake fails: the connection really is TLS,
	// and verified.
	bare, _ := redis.ParseURL("rediss://" + srv.Addr)
	bc := redis.NewClient(bare)
	defer bc.Close()
	if err := bc.Ping(ctx).Err(); err == nil {
		t.Fatal("a client without the test CA connected: the certificate was not verified")
	}

	// Connect speaks TLS for a rediss:// URL and checks the certificate
	// against the system roots, which do not hold the test's CA.
	if c, err := Connect(ctx, "rediss://"+srv.Addr); err == nil || !strings.Contains(err.Error(), "certificate") {
		if c != nil {
			c.Close()
		}
		t.Fatalf("Connect to a server whose CA is not a system root: %v, want a certificate error", err)
	}

	j := newJournal()
	h := keyedHandler("orders", func(_ context.Context, e *testEvent) error {
		j.enter(e.Client, seqKey(e.Client, e.Seq))
		j.leave(e.Client, seqKey(e.Client, e.Seq), e.Seq, true)
		return nil
	})
	startEngine(t, c, fastOptions("tls1"), h)
	p := NewPublisher(c)
	const n = 10
	for i := 1; i <= n; i++ {
		for _, k := range []string{"a", "b"} {
			if err := p.Publish(ctx, ev(k, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, k := range []string{"a", "b"} {
		eventually(t, 20*time.Second, "key "+k+" applied over TLS", func() bool { return j.count(k) >= n })
		if got := j.seqs(k); !inOrder(got, n) {
			t.Errorf("key %s applied %v, want 1..%d in order", k, got, n)
		}
	}
}
