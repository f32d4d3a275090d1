// Package deadletters is the operators' side of order_dead_letter: list,
// page, show and requeue letters, one at a time or in bulk by a filter.
// It needs only the database (no Redis), never closes an order itself, and
// holds the table's statuses and stages.
//
// The close path in package orders writes the letters (a failed close
// upserts one, a successful close resolves it) and replays them
// (Closer.RetryDeadLetters); a requeued letter is due at once for both.
package deadletters
