package readstate

// WriteBehindAcks makes s answer acks before writing them, as it did
// before acks were written through: the benchmark's peer, never a
// production mode (kill -9 loses such acks).
func WriteBehindAcks(s *Service) { s.ackWriteBehind = true }
