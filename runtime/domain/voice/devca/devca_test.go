package devca

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
)

func TestEnsureAndServe(t *testing.T) {
	dir := t.TempDir()
	ca, err := Ensure(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ca.CertPath != filepath.Join(dir, CertFile) {
		t.Fatalf("CertPath %s", ca.CertPath)
	}
	if st, err := os.Stat(filepath.Join(dir, KeyFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	again, err := Ensure(dir)
	if err != nil || !again.cert.Equal(ca.cert) {
		t.Fatalf("second Ensure made a different CA: %v", err)
	}
	cfg, err := ca.ServerConfig("voice.example")
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	// A client trusting only voice-ca.pem verifies the server by IP.
	c, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{RootCAs: again.Pool(), ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatalf("handshake with the CA-issued certificate: %v", err)
	}
	c.Close()
	if _, err := tls.Dial("tcp", l.Addr().String(), &tls.Config{ServerName: "127.0.0.1"}); err == nil {
		t.Fatal("a client without the CA accepted the certificate")
	}
}
