package api

import "github.com/orderjob/executor/xxljob/authguard"

// SetAuthBurst lets tests that send many wrong tokens on purpose have that
// many failures before an address is refused.
func SetAuthBurst(s *Server, burst int) {
	s.guard = authguard.New(authguard.Config{Surface: "api", Burst: burst, Logger: s.log})
}
