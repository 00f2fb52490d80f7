package memlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
	"time"
)

// A partition is one append-only segment file. Each record is a frame:
//
//	u32 length of body | u32 CRC-32C of body | body
//	body = i64 unix nanos | u32 key length | key | value
//
// On open the file is scanned; a torn or corrupt tail (an append that was
// never acknowledged) is truncated away.
//
// Appends are group-committed: each appender writes under the lock, then
// one fsync covers every write made before it, and records become visible
// to readers (and Append returns) only once synced. A failed write or fsync
// breaks the partition for good (the file's state is unknown); reopening
// the log truncates whatever was not acknowledged.
type partition struct {
	mu      sync.Mutex
	f       *os.File // nil for an in-memory partition
	sync    bool
	size    int64
	pos     []int64  // file position of each written offset
	synced  int64    // offsets below are durable and visible
	broken  error    // sticky write or fsync failure
	mem     [][]byte // bodies, for an in-memory partition
	changed chan struct{}

	syncMu sync.Mutex // one fsync at a time
}

const frameHeader = 8

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func openPartition(path string, fsync bool) (*partition, error) {
	p := &partition{sync: fsync, changed: make(chan struct{})}
	if path == "" {
		return p, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("memlog: open partition: %w", err)
	}
	p.f = f
	if err := p.scan(); err != nil {
		f.Close()
		return nil, err
	}
	return p, nil
}

func (p *partition) scan() error {
	st, err := p.f.Stat()
	if err != nil {
		return fmt.Errorf("memlog: stat partition: %w", err)
	}
	var hdr [frameHeader]byte
	var off int64
	for off+frameHeader <= st.Size() {
		if _, err := p.f.ReadAt(hdr[:], off); err != nil {
			return fmt.Errorf("memlog: scan partition: %w", err)
		}
		n := int64(binary.BigEndian.Uint32(hdr[:4]))
		if off+frameHeader+n > st.Size() {
			break
		}
		body := make([]byte, n)
		if _, err := p.f.ReadAt(body, off+frameHeader); err != nil {
			return fmt.Errorf("memlog: scan partition: %w", err)
		}
		if crc32.Checksum(body, castagnoli) != binary.BigEndian.Uint32(hdr[4:]) {
			break
		}
		p.pos = append(p.pos, off)
		off += frameHeader + n
	}
	if off != st.Size() {
		if err := p.f.Truncate(off); err != nil {
			return fmt.Errorf("memlog: truncate torn tail: %w", err)
		}
	}
	p.size = off
	p.synced = int64(len(p.pos))
	return nil
}

func encodeBody(key, value []byte, t time.Time) []byte {
	b := make([]byte, 12+len(key)+len(value))
	binary.BigEndian.PutUint64(b, uint64(t.UnixNano()))
	binary.BigEndian.PutUint32(b[8:], uint32(len(key)))
	copy(b[12:], key)
	copy(b[12+len(key):], value)
	return b
}

func decodeBody(b []byte) (key, value []byte, t time.Time, err error) {
	if len(b) < 12 {
		return nil, nil, time.Time{}, errors.New("memlog: short record")
	}
	t = time.Unix(0, int64(binary.BigEndian.Uint64(b)))
	kl := int(binary.BigEndian.Uint32(b[8:]))
	if 12+kl > len(b) {
		return nil, nil, time.Time{}, errors.New("memlog: bad key length")
	}
	return b[12 : 12+kl], b[12+kl:], t, nil
}

// append writes bodies as consecutive records and, when syncing, waits
// for an fsync that covers them. It returns the offset of the first.
func (p *partition) append(bodies [][]byte) (int64, error) {
	p.mu.Lock()
	first := int64(len(p.pos) + len(p.mem))
	if p.f == nil {
		p.mem = append(p.mem, bodies...)
		p.notifyLocked()
		p.mu.Unlock()
		return first, nil
	}
	if p.broken != nil {
		p.mu.Unlock()
		return 0, p.broken
	}
	var buf []byte
	positions := make([]int64, 0, len(bodies))
	off := p.size
	for _, body := range bodies {
		var hdr [frameHeader]byte
		binary.BigEndian.PutUint32(hdr[:4], uint32(len(body)))
		binary.BigEndian.PutUint32(hdr[4:], crc32.Checksum(body, castagnoli))
		positions = append(positions, off)
		buf = append(buf, hdr[:]...)
		buf = append(buf, body...)
		off += frameHeader + int64(len(body))
	}
	if _, err := p.f.WriteAt(buf, p.size); err != nil {
		p.broken = fmt.Errorf("memlog: write: %w", err)
		p.mu.Unlock()
		return 0, p.broken
	}
	p.size = off
	p.pos = append(p.pos, positions...)
	end := int64(len(p.pos))
	if !p.sync {
		p.synced = end
		p.notifyLocked()
		p.mu.Unlock()
		return first, nil
	}
	p.mu.Unlock()
	return first, p.syncTo(end)
}

// syncTo returns once offsets below end are durable, running an fsync if
// no other appender's fsync covered them.
func (p *partition) syncTo(end int64) error {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	p.mu.Lock()
	if p.synced >= end {
		p.mu.Unlock()
		return nil
	}
	if p.broken != nil {
		p.mu.Unlock()
		return p.broken
	}
	written := int64(len(p.pos))
	p.mu.Unlock()
	err := p.f.Sync()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.broken = fmt.Errorf("memlog: fsync: %w", err)
		return p.broken
	}
	p.synced = written
	p.notifyLocked()
	return nil
}

// length returns the number of visible records.
func (p *partition) length() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.f == nil {
		return int64(len(p.mem))
	}
	return p.synced
}

func (p *partition) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// read returns up to max record bodies starting at offset, and a channel
// closed at the next append (to wait on when nothing is there).
func (p *partition) read(offset int64, max int) ([][]byte, chan struct{}, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.f == nil {
		if offset >= int64(len(p.mem)) {
			return nil, p.changed, nil
		}
		end := min(offset+int64(max), int64(len(p.mem)))
		return p.mem[offset:end], p.changed, nil
	}
	n := p.synced
	if offset >= n {
		return nil, p.changed, nil
	}
	end := min(offset+int64(max), n)
	start := p.pos[offset]
	stop := p.size
	if end < int64(len(p.pos)) {
		stop = p.pos[end]
	}
	buf := make([]byte, stop-start)
	if _, err := p.f.ReadAt(buf, start); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("memlog: read: %w", err)
	}
	out := make([][]byte, 0, end-offset)
	for o := offset; o < end; o++ {
		at := p.pos[o] - start
		l := int64(binary.BigEndian.Uint32(buf[at:]))
		out = append(out, buf[at+frameHeader:at+frameHeader+l])
	}
	return out, p.changed, nil
}

func (p *partition) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.f == nil {
		return nil
	}
	err := p.f.Close()
	p.f = nil
	p.pos = nil
	return err
}
