//go:build integration

package cassandra_test

import (
	"context"
	"testing"
	"time"
)

// TestCredentialsOnAllowAllCluster: a store configured with credentials
// (the operator's pods always get CONCORD_CASSANDRA_USERNAME when the
// cluster names a Secret) still connects to a cluster that does not ask
// for them (the test server runs AllowAllAuthenticator: the driver's
// PasswordAuthenticator is only used when the server challenges). A
// cluster that does challenge cannot be started here cheaply; the
// authenticator itself is checked in auth_test.go.
func TestCredentialsOnAllowAllCluster(t *testing.T) {
	addr := server(t)
	cfg := testConfig(addr, sharedKeyspace(t, addr))
	cfg.Username, cfg.Password = "concord", "s3cret"
	s := newTestStore(t, cfg)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping with credentials on an AllowAll cluster: %v", err)
	}
}
