// Package config loads the executor's configuration: a YAML file laid out like
// the Java executor's application.yml, then environment variables, which win
// over the file. Every key has a documented default, so no file is needed to
// start. Load reports every problem at once.
//
// The table of keys lives in the struct tags below: `yaml` is the key's name in
// its section, `also` other full paths that set the same value (the Java
// executor moved some keys between versions), `env` the environment variable,
// `default` the value used when neither sets it (for a key whose behaviour a
// domain package owns, that package's constant instead, listed in
// defaults.go), `secret` and `redact` how LogValue hides it. Keys() lists them all, with
// the Spring Boot spellings of the environment names a Java deployment sets,
// for docs and for tests that keep docker-compose.yml in step with the loader.
//
// A `.properties` file (application.properties, xxl-job-executor.properties)
// is read as well as YAML.
package config

import (
	"time"
)

// Config is the whole configuration. Sections mirror the YAML layout.
type Config struct {
	XXL    XXL    `yaml:"xxl"`
	MySQL  MySQL  `yaml:"mysql"`
	Redis  Redis  `yaml:"redis"`
	API    API    `yaml:"api"`
	Log    Log    `yaml:"log"`
	Order  Order  `yaml:"order"`
	Delay  Delay  `yaml:"delay"`
	Outbox Outbox `yaml:"outbox"`

	ignored []string // Spring Boot keys of a Java application file, skipped (see Notices)
}

// XXL is the `xxl:` section; only `xxl.job` lives in it, as in the Java executor.
type XXL struct {
	Job XXLJob `yaml:"job"`
}

// XXLJob is `xxl.job`: the admin, the token and this executor.
type XXLJob struct {
	Admin Admin `yaml:"admin"`
	// AccessToken is one setting under three keys, one per generation of the
	// Java executor (2.3-2.4, 2.5-3.4, after 3.4); two of them with different
	// values are an error.
	AccessToken string   `yaml:"accessToken" also:"xxl.job.admin.accessToken,xxl.job.executor.accessToken" env:"XXL_JOB_ACCESS_TOKEN" secret:"true" doc:"shared secret with the admin, at least 16 characters; serve refuses to start without it unless xxl.job.executor.openWithoutToken is true"`
	Executor    Executor `yaml:"executor"`
}

// Admin is `xxl.job.admin`: where the admin is, and the console user that
// `executor provision` and `executor trigger` log in with.
type Admin struct {
	// Addresses are admin base URLs including the context path, tried in order.
	Addresses []string      `yaml:"addresses" redact:"url" env:"XXL_JOB_ADMIN_ADDRESSES" default:"http://127.0.0.1:8080" doc:"admin base URLs with the admin's context path (none from 3.4.1; add /xxl-job-admin for 3.4.0 and older), comma-separated, tried in order"`
	Timeout   time.Duration `yaml:"timeout" env:"XXL_JOB_ADMIN_TIMEOUT" doc:"timeout of each call to the admin"`
	Username  string        `yaml:"username" env:"XXL_JOB_ADMIN_USERNAME" default:"admin" doc:"console user for provision and trigger (needs the admin role)"`
	Password  string        `yaml:"password" env:"XXL_JOB_ADMIN_PASSWORD" secret:"true" doc:"console password; prefer the environment variable"`
	Version   string        `yaml:"version" env:"XXL_JOB_ADMIN_VERSION" doc:"admin generation, for the executor protocol and the console API: auto, 2.x, 3.3, 3.4 or main (the branch after 3.4)"`
	JobsFile  string        `yaml:"jobsFile" env:"XXL_JOB_ADMIN_JOBSFILE" default:"config/jobs.yml" doc:"declarative jobs file used by provision and trigger"`
	TLS       AdminTLS      `yaml:"tls"`
}

// AdminTLS is `xxl.job.admin.tls`: how an https admin is trusted, by the
// executor and by provision and trigger.
type AdminTLS struct {
	CAFile             string `yaml:"caFile" env:"XXL_JOB_ADMIN_TLS_CAFILE" doc:"PEM file of CA certificates trusted for an https admin, besides the system's (a private CA)"`
	InsecureSkipVerify bool   `yaml:"insecureSkipVerify" env:"XXL_JOB_ADMIN_TLS_INSECURESKIPVERIFY" default:"false" doc:"accept any certificate from the admin, as the Java executor does; warned at every start"`
}

// Executor is `xxl.job.executor`.
type Executor struct {
	Enabled           bool          `yaml:"enabled" env:"XXL_JOB_EXECUTOR_ENABLED" default:"true" doc:"false turns the XXL-JOB side off (no protocol server, no registration); the API port and the delayed-task dispatcher still run"`
	AppName           string        `yaml:"appname" env:"XXL_JOB_EXECUTOR_APPNAME" default:"order-job-executor" doc:"executor group AppName in the admin (4-64 chars)"`
	Address           string        `yaml:"address" redact:"url" env:"XXL_JOB_EXECUTOR_ADDRESS" doc:"address advertised to the admin; empty means http://{ip}:{port}/"`
	IP                string        `yaml:"ip" env:"XXL_JOB_EXECUTOR_IP" doc:"IP advertised when address is empty; empty means the first IPv4 of an interface that is up, not loopback and not excluded, else the host name's"`
	IPExclude         []string      `yaml:"ipExclude" env:"XXL_JOB_EXECUTOR_IPEXCLUDE" doc:"interfaces (name patterns) never advertised by default; - for none"`
	Port              int           `yaml:"port" env:"XXL_JOB_EXECUTOR_PORT" doc:"port of the XXL-JOB protocol server"`
	BindAddr          string        `yaml:"bindAddr" env:"XXL_JOB_EXECUTOR_BINDADDR" doc:"listen address; empty means :{port} (all interfaces, as the Java executor), or 127.0.0.1:{port} with openWithoutToken"`
	OpenWithoutToken  bool          `yaml:"openWithoutToken" env:"XXL_JOB_EXECUTOR_OPENWITHOUTTOKEN" default:"false" doc:"true lets serve start without xxl.job.accessToken: anyone who reaches the port can run and kill jobs, so it then listens on loopback unless bindAddr is set"`
	LogPath           string        `yaml:"logpath" env:"XXL_JOB_EXECUTOR_LOGPATH" doc:"folder of run logs and the callback spool"`
	LogRetentionDays  int           `yaml:"logretentiondays" env:"XXL_JOB_EXECUTOR_LOGRETENTIONDAYS" doc:"days run logs are kept; below 3 disables cleanup"`
	ShutdownTimeout   time.Duration `yaml:"shutdownTimeout" env:"XXL_JOB_EXECUTOR_SHUTDOWNTIMEOUT" doc:"how long a graceful shutdown waits for running jobs before cancelling them"`
	LogReadLimit      int           `yaml:"logReadLimit" env:"XXL_JOB_EXECUTOR_LOGREADLIMIT" doc:"bytes of a run log one /log answer carries at most (the admin holds each answer in memory); a longer answer ends with a line naming the file"`
	CallbackQueueSize int           `yaml:"callbackQueueSize" env:"XXL_JOB_EXECUTOR_CALLBACKQUEUESIZE" doc:"run results held in memory for delivery; each is on disk first, and one that finds the queue full is delivered from disk"`
	// The Java executor's package filter for its handler scan and its GLUE
	// switch: accepted so a Java configuration loads, with a notice, since
	// handlers are compiled in and GLUE is always refused.
	ExcludedPackage string `yaml:"excludedpackage" env:"XXL_JOB_EXECUTOR_EXCLUDEDPACKAGE" doc:"accepted from Java configurations and ignored (handlers are compiled in; no package scan)"`
	GlueEnabled     bool   `yaml:"glueenabled" env:"XXL_JOB_EXECUTOR_GLUEENABLED" default:"false" doc:"accepted from Java configurations; GLUE (script) jobs are always refused, so true only logs a warning"`
}

// MySQL is `mysql`.
type MySQL struct {
	DSN          string `yaml:"dsn" env:"MYSQL_DSN" default:"root@tcp(127.0.0.1:3306)/test" secret:"true" doc:"go-sql-driver DSN; parseTime and loc are added when missing, and rejectReadOnly=true unless the DSN sets it"`
	TimeZone     string `yaml:"timeZone" env:"MYSQL_TIME_ZONE" doc:"session time_zone, e.g. '+08:00'; must be the zone order_info.create_time is written in; empty keeps the server's default"`
	MaxOpenConns int    `yaml:"maxOpenConns" env:"MYSQL_MAX_OPEN_CONNS" default:"16" doc:"connection pool size"`
	// ConnMaxLifetime and ConnMaxIdleTime bound how long a pooled
	// connection lives, so connections to an old primary do not outlive a
	// failover (docs/operations.md, Failover of the database).
	ConnMaxLifetime time.Duration `yaml:"connMaxLifetime" env:"MYSQL_CONN_MAX_LIFETIME" default:"5m" doc:"longest a pooled connection is reused (1s..24h)"`
	ConnMaxIdleTime time.Duration `yaml:"connMaxIdleTime" env:"MYSQL_CONN_MAX_IDLE_TIME" default:"1m" doc:"longest a connection waits idle in the pool before it is closed (1s..24h)"`
	// AllowDSTZone lets serve and run start when the session time zone
	// observes daylight saving (see docs/time-zones.md).
	AllowDSTZone bool `yaml:"allowDSTZone" env:"MYSQL_ALLOW_DST_ZONE" default:"false" doc:"start even when the session time zone observes daylight saving (orders close up to an hour early or late at each change); false refuses to start, unless order.schema.timeUnit is an epoch unit"`
	// MigrationsTable is executor migrate's history table.
	MigrationsTable string `yaml:"migrationsTable" env:"MYSQL_MIGRATIONS_TABLE" doc:"history table of executor migrate (never another tool's schema_migrations)"`
}

// Redis is `redis`: one address, a Sentinel group or a Cluster, plus optional
// independent nodes for a Redlock quorum.
type Redis struct {
	Addr       []string `yaml:"addr" env:"REDIS_ADDR" default:"127.0.0.1:6379" doc:"address, or comma-separated seed addresses of a Cluster or Sentinels"`
	Mode       string   `yaml:"mode" env:"REDIS_MODE" default:"auto" doc:"auto, single, sentinel or cluster (auto: sentinel when masterName is set, cluster when several addresses)"`
	MasterName string   `yaml:"masterName" env:"REDIS_MASTER_NAME" doc:"Sentinel master name"`
	Username   string   `yaml:"username" env:"REDIS_USERNAME" doc:"ACL user"`
	Password   string   `yaml:"password" env:"REDIS_PASSWORD" secret:"true" doc:"password"`
	DB         int      `yaml:"db" env:"REDIS_DB" default:"0" doc:"database number (single and sentinel modes; a Cluster has only 0): negative is refused at load, one the server does not have at start"`
	LockNodes  []string `yaml:"lockNodes" env:"REDIS_LOCK_NODES" doc:"independent Redis nodes for order locks (Redlock quorum); empty locks on the client above"`
	// SentinelUsername and SentinelPassword are the Sentinels' own
	// credentials (sentinel mode); the ones above are the data nodes'.
	SentinelUsername string   `yaml:"sentinelUsername" env:"REDIS_SENTINEL_USERNAME" doc:"ACL user on the Sentinels (sentinel mode)"`
	SentinelPassword string   `yaml:"sentinelPassword" env:"REDIS_SENTINEL_PASSWORD" secret:"true" doc:"password of the Sentinels (their requirepass, or the password of sentinelUsername)"`
	TLS              RedisTLS `yaml:"tls"`
}

// RedisTLS is `redis.tls`: TLS on every Redis connection (the client, the
// Sentinels, each lock node). The files are read when the executor starts.
type RedisTLS struct {
	Enabled            bool   `yaml:"enabled" env:"REDIS_TLS_ENABLED" default:"false" doc:"TLS on every Redis connection: the client above, the Sentinels and each lock node"`
	CAFile             string `yaml:"caFile" env:"REDIS_TLS_CA_FILE" doc:"PEM file of the CAs that sign the servers' certificates; empty trusts the system's roots"`
	CertFile           string `yaml:"certFile" env:"REDIS_TLS_CERT_FILE" doc:"PEM client certificate, for servers with tls-auth-clients; needs keyFile"`
	KeyFile            string `yaml:"keyFile" env:"REDIS_TLS_KEY_FILE" doc:"PEM private key of certFile"`
	ServerName         string `yaml:"serverName" env:"REDIS_TLS_SERVER_NAME" doc:"name every server certificate is checked against; empty checks each address's host"`
	InsecureSkipVerify bool   `yaml:"insecureSkipVerify" env:"REDIS_TLS_INSECURE_SKIP_VERIFY" default:"false" doc:"accept any server certificate (tests only; logged as a warning at start)"`
}

// API is `api`: the executor's own HTTP port (health, metrics, delayed tasks,
// dead letters), separate from the XXL-JOB port.
type API struct {
	Addr        string `yaml:"addr" env:"EXECUTOR_API_ADDR" default:"127.0.0.1:9998" doc:"listen address of the API port; empty disables it"`
	Token       string `yaml:"token" env:"EXECUTOR_API_TOKEN" secret:"true" doc:"token required on the API port except /healthz, /readyz, /metrics, at least 16 characters; empty disables the check (loud warning)"`
	TokenHeader string `yaml:"tokenHeader" env:"EXECUTOR_API_TOKEN_HEADER" default:"X-Executor-Token" doc:"header carrying the API token"`
	Pprof       bool   `yaml:"pprof" env:"EXECUTOR_API_PPROF" default:"false" doc:"serve Go pprof under /debug/pprof/ (token protected)"`
	// The operator console under /console/ (docs/console.md).
	Console        bool          `yaml:"console" env:"EXECUTOR_API_CONSOLE" default:"true" doc:"serve the operator console under /console/; it stays off (and says why) without consoleTokens"`
	ConsoleTokens  []string      `yaml:"consoleTokens" env:"EXECUTOR_API_CONSOLE_TOKENS" secret:"true" doc:"console operators' personal sign-in tokens as name:token (token at least 16 characters), comma-separated; the name is recorded with every action"`
	ConsoleSession time.Duration `yaml:"consoleSession" env:"EXECUTOR_API_CONSOLE_SESSION" default:"8h" doc:"how long a console sign-in lasts (5m..168h)"`
}

// Log is `log`: the process log (run logs are separate, under logpath).
type Log struct {
	Level  string `yaml:"level" env:"LOG_LEVEL" default:"info" doc:"debug, info, warn or error"`
	Format string `yaml:"format" env:"LOG_FORMAT" default:"auto" doc:"auto, json or text; auto is text when the log goes to a terminal, JSON otherwise"`
}

// Order is `order`: the order jobs.
type Order struct {
	Timeout      OrderTimeout      `yaml:"timeout"`
	Close        OrderClose        `yaml:"close"`
	DeadLetter   OrderDeadLetter   `yaml:"deadLetter"`
	Payment      OrderPayment      `yaml:"payment"`
	Compensation OrderCompensation `yaml:"compensation"`
	Schema       OrderSchema       `yaml:"schema"`
	// Sources are the order databases and their tables (docs/sharded-orders.md);
	// empty: mysql.dsn holding order.schema's table, as before.
	Sources OrderSources `yaml:"sources" env:"ORDER_SOURCES" doc:"order databases and their order tables, each {name, dsn, maxOpenConns, connMaxLifetime, connMaxIdleTime, tables}; tables a list of names or patterns such as t_order_{0..15}, the item table following the same suffix; pool settings of 0 take mysql.*'s; the environment variable holds the same list as one line of YAML; empty: one source, mysql.dsn with order.schema.table"`
}

// OrderDeadLetter is `order.deadLetter`: retries of orders whose close failed.
type OrderDeadLetter struct {
	MaxAttempts int           `yaml:"maxAttempts" env:"ORDER_DEAD_LETTER_MAX_ATTEMPTS" default:"8" doc:"attempts before a dead letter is parked for a person"`
	BaseBackoff time.Duration `yaml:"baseBackoff" env:"ORDER_DEAD_LETTER_BASE_BACKOFF" doc:"wait before the first retry; doubles per attempt"`
	MaxBackoff  time.Duration `yaml:"maxBackoff" env:"ORDER_DEAD_LETTER_MAX_BACKOFF" doc:"longest wait between retries"`
}

// OrderPayment is `order.payment`: the payment side's close-trade call, made
// before an order is closed locally so nobody can pay a trade being closed.
type OrderPayment struct {
	CloseURL    string        `yaml:"closeURL" redact:"url" env:"ORDER_PAYMENT_CLOSE_URL" doc:"URL called with the order number before each close; empty disables the step"`
	Token       string        `yaml:"token" env:"ORDER_PAYMENT_TOKEN" secret:"true" doc:"token sent to the payment side"`
	TokenHeader string        `yaml:"tokenHeader" env:"ORDER_PAYMENT_TOKEN_HEADER" doc:"header carrying the payment token"`
	Timeout     time.Duration `yaml:"timeout" env:"ORDER_PAYMENT_TIMEOUT" doc:"timeout of each close-trade call"`
	Retries     int           `yaml:"retries" env:"ORDER_PAYMENT_RETRIES" default:"2" doc:"retries of a failed close-trade call before the order is left to the next pass"`
}

// OrderCompensation is `order.compensation`: where stock and coupons are
// given back. local updates this database's tables in the close
// transaction; outbox writes events in it and a relay delivers them to the
// inventory and coupon services.
type OrderCompensation struct {
	Mode         string `yaml:"mode" env:"ORDER_COMPENSATION_MODE" default:"local" doc:"local or outbox"`
	InventoryURL string `yaml:"inventoryURL" redact:"url" env:"ORDER_COMPENSATION_INVENTORY_URL" doc:"outbox mode: endpoint receiving stock-release events"`
	CouponURL    string `yaml:"couponURL" redact:"url" env:"ORDER_COMPENSATION_COUPON_URL" doc:"outbox mode: endpoint receiving coupon-restore events"`
	Token        string `yaml:"token" env:"ORDER_COMPENSATION_TOKEN" secret:"true" doc:"token sent to those endpoints"`
	TokenHeader  string `yaml:"tokenHeader" env:"ORDER_COMPENSATION_TOKEN_HEADER" doc:"header carrying that token"`
}

// OrderTimeout is `order.timeout`, keyed as the order service's own settings.
type OrderTimeout struct {
	PaymentTimeoutMinutes  int `yaml:"payment_timeout_minutes" env:"ORDER_TIMEOUT_PAYMENT_TIMEOUT_MINUTES" default:"30" doc:"default timeout_minutes of new orders (demo data, column default); never shortens an existing order"`
	FulfillmentTimeoutDays int `yaml:"fulfillment_timeout_days" env:"ORDER_TIMEOUT_FULFILLMENT_TIMEOUT_DAYS" doc:"paid orders not shipped within this many days are flagged"`
	AutoConfirmDays        int `yaml:"auto_confirm_days" env:"ORDER_TIMEOUT_AUTO_CONFIRM_DAYS" doc:"shipped orders are completed after this many days"`
}

// OrderClose is `order.close`: the close job's tuning.
type OrderClose struct {
	LockKeyPrefix string        `yaml:"lockKeyPrefix" env:"ORDER_CLOSE_LOCK_KEY_PREFIX" doc:"prefix before order:close:{orderNo} lock keys"`
	LockTTL       time.Duration `yaml:"lockTTL" env:"ORDER_CLOSE_LOCK_TTL" doc:"per-order lock expiry; well above a page's close transaction"`
	PageSize      int           `yaml:"pageSize" env:"ORDER_CLOSE_PAGE_SIZE" doc:"orders per scan page and close batch (job param pageSize overrides)"`
	RunRetention  time.Duration `yaml:"runRetention" env:"ORDER_CLOSE_RUN_RETENTION" doc:"records of close runs (order_close_run, the console's history) older than this are deleted"`
}

// OrderSchema is `order.schema`: where the shop keeps its orders. Left
// without a table, the executor's own schema is used (order_info and its
// neighbours, created and migrated by executor migrate). Naming the table
// declares the shop's own schema: the keys below then name its columns
// (their defaults are the executor's names), and executor migrate never
// creates or alters the shop's tables. See docs/your-schema.md.
type OrderSchema struct {
	Table          string   `yaml:"table" env:"ORDER_SCHEMA_TABLE" doc:"the shop's order table; empty: the executor's own order_info, migrated by executor migrate"`
	ScanIndex      string   `yaml:"scanIndex" env:"ORDER_SCHEMA_SCAN_INDEX" doc:"index of the order table led by (status, createTime), or (status, dueTime), that the scan walks"`
	ID             string   `yaml:"id" env:"ORDER_SCHEMA_ID" doc:"the order's numeric primary key"`
	OrderNo        string   `yaml:"orderNo" env:"ORDER_SCHEMA_ORDER_NO" doc:"the order's unique number (any type; dead letters and the close log keep it as text)"`
	User           string   `yaml:"user" env:"ORDER_SCHEMA_USER" doc:"the buyer; read only by coupon.match and givebacks that name it"`
	Status         string   `yaml:"status" env:"ORDER_SCHEMA_STATUS" doc:"the order's status column"`
	CreateTime     string   `yaml:"createTime" env:"ORDER_SCHEMA_CREATE_TIME" doc:"when the order was placed (DATETIME or TIMESTAMP in the session time zone, or an integer as timeUnit says)"`
	Unpaid         string   `yaml:"unpaid" env:"ORDER_SCHEMA_UNPAID" doc:"status value of an order waiting for payment: an integer or a text"`
	Closed         string   `yaml:"closed" env:"ORDER_SCHEMA_CLOSED" doc:"status value a close sets"`
	TimeoutColumn  string   `yaml:"timeoutColumn" env:"ORDER_SCHEMA_TIMEOUT_COLUMN" doc:"column holding each order's payment timeout in minutes; empty, or left out while timeoutMinutes is given: timeoutMinutes for every order"`
	TimeoutMinutes int      `yaml:"timeoutMinutes" env:"ORDER_SCHEMA_TIMEOUT_MINUTES" default:"0" doc:"one payment timeout for all orders, when timeoutColumn is empty"`
	DueTime        string   `yaml:"dueTime" env:"ORDER_SCHEMA_DUE_TIME" doc:"column holding each order's payment deadline itself (DATETIME or TIMESTAMP in the session time zone, or an integer as timeUnit says), instead of createTime and a timeout; the scanIndex is then led by (status, dueTime)"`
	CloseTime      string   `yaml:"closeTime" env:"ORDER_SCHEMA_CLOSE_TIME" doc:"column a close stamps with its time; empty: none"`
	UpdateTime     string   `yaml:"updateTime" env:"ORDER_SCHEMA_UPDATE_TIME" doc:"column a close stamps with its time as the last update; empty: none"`
	CloseReason    string   `yaml:"closeReason" env:"ORDER_SCHEMA_CLOSE_REASON" doc:"column a close writes its reason to; empty: none"`
	TimeUnit       string   `yaml:"timeUnit" env:"ORDER_SCHEMA_TIME_UNIT" doc:"how createTime, dueTime, closeTime and updateTime hold their times: datetime (DATETIME or TIMESTAMP), epochSeconds or epochMillis (integer Unix epoch seconds or milliseconds, compared with the database clock's instant)"`
	Givebacks      []string `yaml:"givebacks" env:"ORDER_SCHEMA_GIVEBACKS" doc:"other amounts a close gives back, each 'table.column += orderColumn by table.key = orderColumn', e.g. 'member.points += used_points by member.id = user_id'; table.key is the table's primary key"`

	Items      OrderSchemaItems      `yaml:"items"`
	Stock      OrderSchemaStock      `yaml:"stock"`
	Coupon     OrderSchemaCoupon     `yaml:"coupon"`
	SoftDelete OrderSchemaSoftDelete `yaml:"softDelete"`
}

// OrderSchemaSoftDelete is `order.schema.softDelete`: the column marking
// an order deleted while its row stays. A deleted unpaid order is never
// closed, so nothing is given back twice when the shop gave it back on
// deleting.
type OrderSchemaSoftDelete struct {
	Column    string `yaml:"column" env:"ORDER_SCHEMA_SOFT_DELETE_COLUMN" doc:"the order table's soft-delete column (delete_status, del_flag, is_deleted, deleted_at); empty: orders are never soft-deleted, every unpaid order past its deadline is closed"`
	LiveValue string `yaml:"liveValue" env:"ORDER_SCHEMA_SOFT_DELETE_LIVE_VALUE" doc:"its value on an order that is NOT deleted: an integer, or a text (quoted, '0', for a text column holding digits); empty (or NULL): NULL is the live value, as with deleted_at"`
}

// OrderSchemaItems is `order.schema.items`: the order lines.
type OrderSchemaItems struct {
	Table       string `yaml:"table" env:"ORDER_SCHEMA_ITEMS_TABLE" doc:"the order-line table"`
	Index       string `yaml:"index" env:"ORDER_SCHEMA_ITEMS_INDEX" doc:"its index on orderColumn"`
	OrderKey    string `yaml:"orderKey" env:"ORDER_SCHEMA_ITEMS_ORDER_KEY" doc:"which of the order's keys lines name: orderNo or id"`
	OrderColumn string `yaml:"orderColumn" env:"ORDER_SCHEMA_ITEMS_ORDER_COLUMN" doc:"the line's column holding that key"`
	SKU         string `yaml:"sku" env:"ORDER_SCHEMA_ITEMS_SKU" doc:"the line's SKU (an integer)"`
	Quantity    string `yaml:"quantity" env:"ORDER_SCHEMA_ITEMS_QUANTITY" doc:"the line's quantity"`
}

// OrderSchemaStock is `order.schema.stock`: what a close gives back to stock.
type OrderSchemaStock struct {
	Table   string   `yaml:"table" env:"ORDER_SCHEMA_STOCK_TABLE" doc:"the stock table; empty: a close gives no stock back"`
	Key     string   `yaml:"key" env:"ORDER_SCHEMA_STOCK_KEY" doc:"its primary or unique key, matching items.sku"`
	Index   string   `yaml:"index" env:"ORDER_SCHEMA_STOCK_INDEX" doc:"the index of stock.key the close forces: PRIMARY, or the unique index's name"`
	Columns []string `yaml:"columns" env:"ORDER_SCHEMA_STOCK_COLUMNS" doc:"each 'column += quantity' or 'column -= quantity' (never below zero), the lines' quantities summed per key"`
}

// OrderSchemaCoupon is `order.schema.coupon`: how a close gives a coupon back.
type OrderSchemaCoupon struct {
	Table       string   `yaml:"table" env:"ORDER_SCHEMA_COUPON_TABLE" doc:"the coupon table; empty: orders carry no coupon"`
	Status      string   `yaml:"status" env:"ORDER_SCHEMA_COUPON_STATUS" doc:"its status column"`
	Used        string   `yaml:"used" env:"ORDER_SCHEMA_COUPON_USED" doc:"status of a coupon used by an unpaid order"`
	Unused      string   `yaml:"unused" env:"ORDER_SCHEMA_COUPON_UNUSED" doc:"status a close gives it back with"`
	OrderColumn string   `yaml:"orderColumn" env:"ORDER_SCHEMA_COUPON_ORDER_COLUMN" doc:"the order's column holding the coupon row's id (NULL: no coupon); unused with match"`
	ID          string   `yaml:"id" env:"ORDER_SCHEMA_COUPON_ID" doc:"the coupon row's id (with match, used only by anyCopy: the key its copies are taken and given back by)"`
	OrderNo     string   `yaml:"orderNo" env:"ORDER_SCHEMA_COUPON_ORDER_NO" doc:"the coupon's column naming the order using it, checked and cleared on close; empty: none"`
	Match       []string `yaml:"match" env:"ORDER_SCHEMA_COUPON_MATCH" doc:"find the coupon row by columns instead of an id: each 'column = orderColumn' (e.g. user_id = user_id, coupon_id = coupon_id); exactly one used row per order"`
	Optional    bool     `yaml:"optional" env:"ORDER_SCHEMA_COUPON_OPTIONAL" default:"false" doc:"with match: an order matching no used row has no coupon and closes (litemall: the coupon row names the order); false: it goes to a dead letter"`
	AnyCopy     bool     `yaml:"anyCopy" env:"ORDER_SCHEMA_COUPON_ANY_COPY" default:"false" doc:"with match: the used rows matching an order are copies of one coupon (macrozheng/mall); a close gives back one of them, distinct rows to the orders of one match key, lowest id first; an order left without one matches none; false: several used rows matching an order make it a dead letter"`
	Index       string   `yaml:"index" env:"ORDER_SCHEMA_COUPON_INDEX" doc:"with match: the coupon table's index on the matched columns, which the close forces; empty: none forced (statistics may then make the lookup scan the coupon table)"`
}

// Delay is `delay`: durable delayed tasks and their dispatcher.
type Delay struct {
	Enabled           bool          `yaml:"enabled" env:"DELAY_ENABLED" default:"true" doc:"run the delayed-task dispatcher in serve mode"`
	RunningTimeout    time.Duration `yaml:"runningTimeout" env:"DELAY_RUNNING_TIMEOUT" doc:"a task RUNNING longer than this is recovered to PENDING"`
	HandlerTimeout    time.Duration `yaml:"handlerTimeout" env:"DELAY_HANDLER_TIMEOUT" doc:"each task handler's timeout; with the close path's cancellation bound (order.close.lockTTL + 3s and a little) at most 90% of runningTimeout"`
	NotNowBackoff     time.Duration `yaml:"notNowBackoff" env:"DELAY_NOT_NOW_BACKOFF" doc:"first wait of a task that could not run now (lock held elsewhere, Redis or the database unreachable, payment side failing); no retry is spent"`
	NotNowBackoffMax  time.Duration `yaml:"notNowBackoffMax" env:"DELAY_NOT_NOW_BACKOFF_MAX" doc:"longest such wait (the waits double up to it)"`
	NotNowMaxAge      time.Duration `yaml:"notNowMaxAge" env:"DELAY_NOT_NOW_MAX_AGE" doc:"past this long after its execute time, a task that cannot run now counts a failure (spends a retry)"`
	ReconcileInterval time.Duration `yaml:"reconcileInterval" env:"DELAY_RECONCILE_INTERVAL" doc:"how often the timer is brought in line with the table (and stuck tasks recovered)"`
	Retention         time.Duration `yaml:"retention" env:"DELAY_RETENTION" doc:"DONE and CANCELLED tasks older than this are purged"`
	BatchSize         int           `yaml:"batchSize" env:"DELAY_BATCH_SIZE" doc:"most due tasks a dispatcher pops and claims at once, and most orders one orderTimeoutClose batch closes together (1..1000); batches grow this large only while tasks come due faster than they are closed"`
	KeyPrefix         string        `yaml:"keyPrefix" env:"DELAY_KEY_PREFIX" doc:"prefix of the dispatcher's Redis keys; the tasks of an order source on another database than mysql.dsn's use {keyPrefix}source:{name}:"`
	TimerShards       int           `yaml:"timerShards" env:"DELAY_TIMER_SHARDS" doc:"how many sorted sets the Redis timer is split over (1..64): 1 is the single key {keyPrefix}timer; more are {keyPrefix}timer:{0}, {keyPrefix}timer:{1} ..., each in a Redis Cluster slot of its own (keyPrefix then without '{' or '}'); executors sharing tasks use the same count, and the refill moves what another count left"`
	Services          []string      `yaml:"services" redact:"named" env:"DELAY_SERVICES" doc:"HTTP task targets as name=baseURL, comma-separated"`
	ServiceToken      string        `yaml:"serviceToken" env:"DELAY_SERVICE_TOKEN" secret:"true" doc:"token sent to HTTP task targets"`
	Timer             string        `yaml:"timer" env:"DELAY_TIMER" default:"redis" doc:"what tells the dispatchers when tasks fall due: redis (a sorted set) or rabbitmq (delay-tier queues, delay.rabbitmq); the table stays the truth either way, and Redis is still needed for the order locks"`
	RabbitMQ          DelayRabbitMQ `yaml:"rabbitmq"`
}

// DelayRabbitMQ is `delay.rabbitmq`: the RabbitMQ timer (delay.timer:
// rabbitmq), on RabbitMQ 3.10 or later without any plugin.
type DelayRabbitMQ struct {
	URL            string        `yaml:"url" redact:"url" env:"DELAY_RABBITMQ_URL" doc:"amqp://user:password@host:5672/vhost; required with delay.timer rabbitmq"`
	Prefix         string        `yaml:"prefix" env:"DELAY_RABBITMQ_PREFIX" doc:"start of the timer's exchange and queue names ({prefix}hop, {prefix}ready, {prefix}wait.1s ...); executors sharing tasks share it; an order source on another database than mysql.dsn's uses {prefix}source.{name}."`
	Prefetch       int           `yaml:"prefetch" env:"DELAY_RABBITMQ_PREFETCH" doc:"most messages a dispatcher holds unacknowledged (due within a second, or running); above twice the tasks due per second per executor; at most 65535"`
	RepublishAfter time.Duration `yaml:"republishAfter" env:"DELAY_RABBITMQ_REPUBLISH_AFTER" doc:"the reconciler publishes again a task never confirmed published this long after its last change, or overdue by this much (its message lost or purged)"`
}

// Outbox is `outbox`: how the relay treats events its receivers keep
// refusing (order.compensation.mode outbox; the endpoints are in
// order.compensation).
type Outbox struct {
	MaxAttempts int `yaml:"maxAttempts" env:"OUTBOX_MAX_ATTEMPTS" doc:"failed deliveries after which an outbox event is parked for an operator (a 400, 401, 403, 404, 409, 410 or 422 answer parks it at once); -1 never parks after failures"`
}
