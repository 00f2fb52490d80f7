package gateway

// isHeartbeat reports whether b is a heartbeat payload in the shape every
// client library sends: a JSON object with exactly the keys "op" (1) and
// "d" (null or an integer), in either order, with optional whitespace. It
// lets the read path handle the one payload an idle session sends
// without encoding/json; anything else, including unusual but valid
// heartbeats, goes through decodeFrame.
func isHeartbeat(b []byte) bool {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	var op, d bool
	for k := 0; k < 2; k++ {
		i = skipSpace(b, i+1)
		var ok bool
		switch {
		case hasAt(b, i, `"op"`):
			if op {
				return false
			}
			op = true
			if i, ok = colon(b, i+4); !ok || !hasAt(b, i, "1") {
				return false
			}
			i++
		case hasAt(b, i, `"d"`):
			if d {
				return false
			}
			d = true
			if i, ok = colon(b, i+3); !ok {
				return false
			}
			if hasAt(b, i, "null") {
				i += 4
			} else if i, ok = integer(b, i); !ok {
				return false
			}
		default:
			return false
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return false
		}
		if k == 0 && b[i] != ',' || k == 1 && b[i] != '}' {
			return false
		}
	}
	return skipSpace(b, i+1) == len(b)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func hasAt(b []byte, i int, s string) bool {
	return i+len(s) <= len(b) && string(b[i:i+len(s)]) == s
}

// colon skips whitespace, a ':' and whitespace after it.
func colon(b []byte, i int) (int, bool) {
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return i, false
	}
	return skipSpace(b, i+1), true
}

// integer skips a JSON integer that fits an int64 (at most 18 digits, so
// no overflow check is needed; longer ones take the slow path).
func integer(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	n := i - start
	if n == 0 || n > 18 || n > 1 && b[start] == '0' {
		return i, false
	}
	return i, true
}
