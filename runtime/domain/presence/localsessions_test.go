package presence

import (
	"context"
	"errors"
	"testing"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// fakeUpstream records calls and fails Update with err.
type fakeUpstream struct {
	err      error
	connects []SessionState
	reported []SessionState
}

func (f *fakeUpstream) Connect(_ context.Context, st SessionState) error {
	f.connects = append(f.connects, st)
	return nil
}

func (f *fakeUpstream) Update(context.Context, event.SessionID, Update) error { return f.err }
func (f *fakeUpstream) Disconnect(context.Context, event.SessionID)           {}
func (f *fakeUpstream) Report(_ context.Context, _ string, sessions []SessionState) {
	f.reported = sessions
}

func TestLocalSessionsApply(t *testing.T) {
	errDown := errors.New("down")
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		err       error
		deferred  func(error) bool
		wantErr   error
		reconnect bool
		status    Status
	}{
		{name: "taken", status: Idle},
		{name: "unknown session reconnects", err: ErrUnknownSession, reconnect: true, status: Idle},
		{name: "refused", err: errDown, wantErr: errDown, status: Online},
		{name: "deferred", err: errDown, deferred: func(err error) bool { return errors.Is(err, errDown) }, wantErr: errDown, status: Idle},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &fakeUpstream{err: tc.err}
			l := NewLocalSessions(LocalSessionsConfig{Upstream: up, Deferred: tc.deferred})
			if err := l.Start(ctx, SessionState{Session: "s1", UserID: 1, Status: Online}); err != nil {
				t.Fatal(err)
			}
			if err := l.Apply(ctx, "s1", Update{Status: Idle}); !errors.Is(err, tc.wantErr) {
				t.Fatalf("Apply: %v, want %v", err, tc.wantErr)
			}
			if got := len(up.connects) == 2; got != tc.reconnect {
				t.Fatalf("reconnected %v, want %v", got, tc.reconnect)
			}
			if tc.reconnect && up.connects[1].Status != Idle {
				t.Fatalf("reconnected with %q, want the update", up.connects[1].Status)
			}
			l.Report(ctx, "n1", []event.Session{{ID: "s1"}})
			if len(up.reported) != 1 || up.reported[0].Status != tc.status {
				t.Fatalf("reported %+v, want status %q", up.reported, tc.status)
			}
		})
	}
}

func TestLocalSessionsReportForgets(t *testing.T) {
	ctx := context.Background()
	up := &fakeUpstream{}
	l := NewLocalSessions(LocalSessionsConfig{Upstream: up})
	_ = l.Start(ctx, SessionState{Session: "s1", UserID: 1, Status: Online})
	_ = l.Start(ctx, SessionState{Session: "s2", UserID: 2, Status: Online})
	l.Report(ctx, "n1", []event.Session{{ID: "s2"}})
	l.Report(ctx, "n1", []event.Session{{ID: "s1"}, {ID: "s2"}})
	if len(up.reported) != 1 || up.reported[0].Session != "s2" {
		t.Fatalf("reported %+v, want only s2 (s1 was forgotten)", up.reported)
	}
	l.End(ctx, "s2")
	l.Report(ctx, "n1", []event.Session{{ID: "s2"}})
	if len(up.reported) != 0 {
		t.Fatalf("reported %+v after End", up.reported)
	}
}
