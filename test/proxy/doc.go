// Package proxy tests Concord behind a real HAProxy: the client's address
// reaches the server through the PROXY protocol (--trusted-proxies), so
// the per-address connection cap, the REST rate limits and bans key on
// each client rather than on the balancer. It needs Debian's haproxy on
// PATH (hack/test-deps.sh installs it) and fails without it. Run it with
//
//	go test -tags integration ./test/proxy/
package proxy
