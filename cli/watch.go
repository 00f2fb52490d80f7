package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// WatchFlags are --watch and --interval of a listing command.
type WatchFlags struct {
	Watch    bool
	Interval time.Duration
}

// DefaultWatchInterval is how often --watch refreshes.
const DefaultWatchInterval = 2 * time.Second

func (w *WatchFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&w.Watch, "watch", "w", false,
		"refresh the view every --interval until interrupted (tables redraw the screen, like top; json and yaml print one document per refresh)")
	cmd.Flags().DurationVar(&w.Interval, "interval", DefaultWatchInterval, "refresh period of --watch")
}

func (w WatchFlags) validate() error {
	if w.Watch && w.Interval < 100*time.Millisecond {
		return fmt.Errorf("--interval %s is too short: at least 100ms (each refresh reads the API server)", w.Interval)
	}
	return nil
}

// Ticks returns a channel of refresh times every d and a stop function;
// tests replace it on the Env to drive refreshes themselves (a closed
// channel ends the watch).
type Ticks func(d time.Duration) (<-chan time.Time, func())

func realTicks(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// clearScreen moves the cursor home and clears the terminal (ANSI).
const clearScreen = "\x1b[H\x1b[2J"

// watch writes render's view once, or with --watch again at every tick
// until ctx ends or an interrupt comes: a table redraws the screen under
// a header naming the view and the time, like `watch` and `top`; json and
// yaml follow one another, like `kubectl get -w -o json`. A refresh that
// fails shows its error in place of the view and the watch goes on: the
// admin endpoint or the API server being away for a moment should not end
// the view an operator is watching an incident with.
func (e *Env) watch(ctx context.Context, w WatchFlags, title string, render func(context.Context, io.Writer) error) error {
	if !w.Watch {
		return render(ctx, e.Out)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	ticks := e.Ticks
	if ticks == nil {
		ticks = realTicks
	}
	c, stopTicks := ticks(w.Interval)
	defer stopTicks()
	table := e.Output != "json" && e.Output != "yaml"
	for {
		var buf bytes.Buffer
		err := render(ctx, &buf)
		if table {
			fmt.Fprintf(e.Out, "%sEvery %s: kubectl concord %s%s%s\n\n", clearScreen, w.Interval, title,
				strings.Repeat(" ", 4), e.now().Format("15:04:05"))
		}
		if err != nil {
			fmt.Fprintf(e.Out, "error: %v\n", err)
		} else {
			_, _ = e.Out.Write(buf.Bytes())
		}
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-c:
			if !ok {
				return nil
			}
		}
	}
}

// now is the Env's clock (tests set Now).
func (e *Env) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}
