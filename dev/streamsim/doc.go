// Package streamsim is a DynamoDB Streams API simulator for tests and
// benchmarks. It is a simulator, not an emulator of record: the local
// stack never uses it (DynamoDB Local is the real component there), but
// DynamoDB Local's stream has a single shard that never splits, so the
// relay's shard lineage, throttling and trimming paths cannot be
// exercised against it. The simulator serves the AWS JSON 1.0 protocol
// (X-Amz-Target: DynamoDBStreams_20120810.<Op>) over HTTP so that
// unmodified code using github.com/aws/aws-sdk-go-v2/service/dynamodbstreams
// reads from it.
//
// What it models: DescribeStream (paginated, parents listed before their
// children), GetShardIterator (TRIM_HORIZON, LATEST, AT_SEQUENCE_NUMBER,
// AFTER_SEQUENCE_NUMBER, AT_TIMESTAMP), GetRecords (a closed shard read to
// its end answers without NextShardIterator), ListStreams, shard splits
// (Split, SplitOldest, SplitEvery), AWS's read limit of
// ReadsPerSecondPerShard GetRecords calls per shard per second
// (LimitExceededException), iterator expiry (ExpiredIteratorException)
// and retention (TrimmedDataAccessException; closed shards older than the
// retention vanish from DescribeStream). What it does not model: the 1 MB
// response limit, automatic shard rollover every few hours, stream
// creation and deletion, and IAM/SigV4 (signatures are ignored).
//
// Records are put with Put; the simulator assigns them a stream-wide
// increasing sequence number (21 decimal digits, so numeric and string
// order agree) and routes each partition key by its hash to the one open
// shard whose hash range covers it, so one key's records stay in order
// within a shard, and across a split the key's earlier records are in
// the parent and later ones in one child. Truth returns every record put,
// per shard, for checking what a reader made of them.
//
// The SDK retries LimitExceededException (a throttling error) by itself
// with back-off; to see the raw error, build the client with NoRetries
// (or set Options.RetryMaxAttempts / Options.Retryer yourself).
//
// Pointing a client at it:
//
//	sim, err := streamsim.Start(streamsim.Config{Shards: 4})
//	if err != nil { ... }
//	defer sim.Close()
//	client := sim.Client() // or sim.Client(streamsim.NoRetries)
//	// which is equivalent to:
//	client = dynamodbstreams.New(dynamodbstreams.Options{
//		Region:       "us-east-1",
//		BaseEndpoint: aws.String(sim.URL()),
//		Credentials:  credentials.NewStaticCredentialsProvider("sim", "sim", ""),
//	})
//	out, err := client.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{
//		StreamArn: aws.String(sim.StreamARN()),
//	})
package streamsim
