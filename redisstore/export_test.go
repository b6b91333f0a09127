package redisstore

// Keys are the keys of scope in s.
func Keys(s *Store, scope string) []string { return s.keys(scope) }
