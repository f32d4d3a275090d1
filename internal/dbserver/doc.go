// Package dbserver says what the database server is and what its errors
// mean. Server (DetectServer, ParseServer) is learned at connect, since a
// few error numbers mean different things on MySQL, MariaDB and TiDB;
// ErrorKind (KindOf, Server.Kind) sorts an error into what the close path
// does about it (dead-letter the order, retry, or stop the run), NotNow
// tells a scheduler not to count it against the order, and Hint says in a
// sentence what an operator can do. SessionZone reads the session's time
// zone and whether it observes daylight saving.
//
// It is a leaf: it knows nothing of orders. The domain's own errors about
// one order's data reach KindOrder by implementing OrderData.
package dbserver
