package gwtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/gorilla/websocket"
)

// IdentifyFrom opens a bare gateway session for load tests that hold
// thousands of them: it dials url from the local address src (nil: any),
// identifies with token and intents and reads until READY, keeping
// nothing. It returns the connection and HELLO's heartbeat interval; the
// read deadline is cleared on return. An op 9 instead of READY is an
// error.
func IdentifyFrom(ctx context.Context, url string, src net.IP, token string, intents uint64, timeout time.Duration) (*websocket.Conn, time.Duration, error) {
	d := websocket.Dialer{
		NetDialContext:   (&net.Dialer{LocalAddr: &net.TCPAddr{IP: src}}).DialContext,
		HandshakeTimeout: timeout,
		ReadBufferSize:   4096,
		WriteBufferSize:  1024,
	}
	ws, resp, err := d.DialContext(ctx, url, nil)
	if err != nil {
		if resp != nil {
			return nil, 0, fmt.Errorf("dial: %w (status %d)", err, resp.StatusCode)
		}
		return nil, 0, fmt.Errorf("dial: %w", err)
	}
	_ = ws.SetReadDeadline(time.Now().Add(timeout))
	var hello struct {
		Op int `json:"op"`
		D  struct {
			HeartbeatInterval int `json:"heartbeat_interval"`
		} `json:"d"`
	}
	if err := ws.ReadJSON(&hello); err != nil || hello.Op != 10 {
		ws.Close()
		return nil, 0, fmt.Errorf("HELLO: op %d, %v", hello.Op, err)
	}
	identify := map[string]any{"op": 2, "d": map[string]any{
		"token": token, "intents": intents,
		"properties": map[string]string{"os": "linux", "browser": "concord-test", "device": "concord-test"},
	}}
	if err := ws.WriteJSON(identify); err != nil {
		ws.Close()
		return nil, 0, fmt.Errorf("IDENTIFY: %w", err)
	}
	for {
		var f struct {
			Op int    `json:"op"`
			T  string `json:"t"`
		}
		if err := ws.ReadJSON(&f); err != nil {
			ws.Close()
			return nil, 0, fmt.Errorf("waiting for READY: %w", err)
		}
		if f.Op == 9 {
			ws.Close()
			return nil, 0, errors.New("INVALID_SESSION instead of READY")
		}
		if f.Op == 0 && f.T == "READY" {
			_ = ws.SetReadDeadline(time.Time{})
			return ws, time.Duration(hello.D.HeartbeatInterval) * time.Millisecond, nil
		}
	}
}

// KeepAlive heartbeats a bare session every interval and discards what
// it receives, until ctx ends (it then closes ws) or the connection fails.
func KeepAlive(ctx context.Context, ws *websocket.Conn, interval time.Duration) {
	stop := context.AfterFunc(ctx, func() { ws.Close() })
	defer stop()
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				_ = ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
				if ws.WriteMessage(websocket.TextMessage, []byte(`{"op":1,"d":null}`)) != nil {
					return
				}
			}
		}
	}()
	for {
		if _, _, err := ws.NextReader(); err != nil {
			return
		}
	}
}
