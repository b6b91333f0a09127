package classify

// isConnErrno is always false on Plan 9, whose network errors are strings;
// timeouts and EOF are still recognised there.
func isConnErrno(error) bool { return false }
