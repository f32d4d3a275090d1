package main

import (
	"fmt"

	"github.com/orderjob/executor/internal/suggest"
)

// didYouMean is `; did you mean "deadletter"?` when word is a near miss of
// one of names, else "".
func didYouMean(word string, names []string) string {
	if guess := suggest.Closest(word, names); guess != "" {
		return fmt.Sprintf("; did you mean %q?", guess)
	}
	return ""
}
