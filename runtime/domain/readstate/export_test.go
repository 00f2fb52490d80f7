package readstate

// WriteBehindAcks makes s answer acks before writing them, as it did
// before acks were written through: the benchmark's peer, never a
// production mode (kill -9 loses such acks).
func WriteBehindAcks(s *Service) { s.ackWriteBehind = true }

// PendingCommit is how many records wait in s's open group commit.
func PendingCommit(s *Service) int {
	s.gc.mu.Lock()
	defer s.gc.mu.Unlock()
	if s.gc.open == nil {
		return 0
	}
	return len(s.gc.open.keys)
}
