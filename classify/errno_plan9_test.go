package classify

import "io"

// Plan 9 has no errno values; stand-ins that classify the same way.
var (
	errRefused error = io.EOF
	errReset   error = io.ErrUnexpectedEOF
)
