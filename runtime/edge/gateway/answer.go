package gateway

import (
	"sync"
	"time"
)

// An op's answer, when it is several dispatches, leaves in one socket
// write. The case that needs it is op 4: the guild answers a join with
// VOICE_STATE_UPDATE and then VOICE_SERVER_UPDATE, two deliveries a few
// microseconds apart. discord.py 2.7 waits for the pair with an
// asyncio.Event it sets and clears at once, and re-arms its wait in a
// fresh task after the first update wakes it; when the second update's
// handler runs in the few loop iterations before that task starts, the
// wake-up is lost and the voice connection times out with both updates in
// hand. Read in one recv, the two are handled in one reader step and the
// window does not exist. So while op 4's handler runs, the connection
// queues what is delivered to it, and the writer sends the queue as one
// batch when the handler returns.

// maxAnswerHold bounds how long a slow handler (a guild on another node
// that is slow to answer) may keep the connection's frames back; after it
// they flow as usual.
const maxAnswerHold = 250 * time.Millisecond

// answeredTogether reports whether op's answer is held until its handler
// returns.
func answeredTogether(op int) bool { return op == OpVoiceStateUpdate }

// holdAnswer makes frames delivered to c queue without being written, until
// the returned release (called by the reader once the handler returned) or
// maxAnswerHold, whichever is first; release hands whatever queued to the
// writer, which gathers it into one write. A close still flushes at once.
func (c *conn) holdAnswer() func() {
	c.qmu.Lock()
	c.held = true
	c.qmu.Unlock()
	var once sync.Once
	release := func() {
		once.Do(func() {
			c.qmu.Lock()
			defer c.qmu.Unlock()
			c.held = false
			if len(c.queue) > 0 || len(c.pending) > 0 {
				c.handOff()
			}
		})
	}
	t := time.AfterFunc(maxAnswerHold, release)
	return func() {
		t.Stop()
		release()
	}
}
