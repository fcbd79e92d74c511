package streamsim

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

// targetPrefix is the X-Amz-Target prefix of DynamoDB Streams' operations.
const targetPrefix = "DynamoDBStreams_20120810."

// errorNamespace prefixes the error's __type as DynamoDB Streams sends
// it; the SDK keeps what follows '#' and looks it up among the modeled
// errors (types.LimitExceededException, ...).
const errorNamespace = "com.amazonaws.dynamodb.v20120810#"

// apiError is an error answered to the client.
type apiError struct {
	status int
	typ    string
	msg    string
}

func (e *apiError) Error() string { return e.typ + ": " + e.msg }

func clientErr(typ, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: typ, msg: fmt.Sprintf(format, args...)}
}

func validation(format string, args ...any) *apiError {
	return clientErr("ValidationException", format, args...)
}

// ServeHTTP answers one DynamoDB Streams call in the AWS JSON 1.0
// protocol. Request signatures are not checked.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeErr(w, &apiError{status: http.StatusMethodNotAllowed, typ: "SerializationException", msg: "only POST is supported"})
		return
	}
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), targetPrefix)
	if !ok || op == "" {
		writeErr(w, clientErr("UnknownOperationException", "unknown X-Amz-Target %q", r.Header.Get("X-Amz-Target")))
		return
	}
	s.count(op)
	if d := s.cfg.CallLatency; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		case <-s.ctx.Done():
			t.Stop()
			writeErr(w, &apiError{status: http.StatusInternalServerError, typ: "InternalServerError", msg: "simulator closed"})
			return
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		writeErr(w, clientErr("SerializationException", "read body: %v", err))
		return
	}
	var out any
	var aerr *apiError
	switch op {
	case "DescribeStream":
		var in describeStreamInput
		if aerr = decode(body, &in); aerr == nil {
			out, aerr = s.describeStream(in)
		}
	case "GetShardIterator":
		var in getShardIteratorInput
		if aerr = decode(body, &in); aerr == nil {
			out, aerr = s.getShardIterator(in)
		}
	case "GetRecords":
		var in getRecordsInput
		if aerr = decode(body, &in); aerr == nil {
			var raw []byte
			raw, aerr = s.getRecords(in)
			if aerr == nil {
				writeRaw(w, raw)
				return
			}
		}
	case "ListStreams":
		var in listStreamsInput
		if aerr = decode(body, &in); aerr == nil {
			out, aerr = s.listStreams(in)
		}
	default:
		aerr = clientErr("UnknownOperationException", "unknown operation %s", op)
	}
	if aerr != nil {
		writeErr(w, aerr)
		return
	}
	raw, err := json.Marshal(out)
	if err != nil {
		s.cfg.Logger.Error("streamsim: encode answer", "op", op, "err", err)
		writeErr(w, &apiError{status: http.StatusInternalServerError, typ: "InternalServerError", msg: err.Error()})
		return
	}
	writeRaw(w, raw)
}

func decode(body []byte, v any) *apiError {
	if len(body) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return clientErr("SerializationException", "decode request: %v", err)
	}
	return nil
}

func writeRaw(w http.ResponseWriter, raw []byte) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("Content-Length", strconv.Itoa(len(raw)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(raw)
}

func writeErr(w http.ResponseWriter, e *apiError) {
	raw, _ := json.Marshal(struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{errorNamespace + e.typ, e.msg})
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("Content-Length", strconv.Itoa(len(raw)))
	w.WriteHeader(e.status)
	_, _ = w.Write(raw)
}

// Wire shapes of the requests and answers.
type (
	describeStreamInput struct {
		StreamArn             string
		Limit                 *int
		ExclusiveStartShardId *string
		ShardFilter           *struct {
			Type    string
			ShardId string
		}
	}
	getShardIteratorInput struct {
		StreamArn         string
		ShardId           string
		ShardIteratorType string
		SequenceNumber    *string
		Timestamp         *float64
	}
	getRecordsInput struct {
		ShardIterator string
		Limit         *int
	}
	listStreamsInput struct {
		TableName               *string
		Limit                   *int
		ExclusiveStartStreamArn *string
	}
	seqRange struct {
		StartingSequenceNumber string
		EndingSequenceNumber   string `json:",omitempty"`
	}
	shardOut struct {
		ShardId             string
		ParentShardId       string `json:",omitempty"`
		SequenceNumberRange seqRange
	}
	keyElem struct {
		AttributeName string
		KeyType       string
	}
	streamDescription struct {
		StreamArn               string
		StreamLabel             string
		StreamStatus            string
		StreamViewType          string
		CreationRequestDateTime int64
		TableName               string
		KeySchema               []keyElem
		Shards                  []shardOut
		LastEvaluatedShardId    string `json:",omitempty"`
	}
	streamOut struct {
		StreamArn, TableName, StreamLabel string
	}
)

func (s *Sim) streamLabel() string {
	if _, label, ok := strings.Cut(s.cfg.StreamARN, "/stream/"); ok {
		return label
	}
	return s.cfg.StreamARN
}

func (s *Sim) checkStream(arn string) *apiError {
	if arn != s.cfg.StreamARN {
		return clientErr("ResourceNotFoundException", "Requested resource not found: Stream: %s not found", arn)
	}
	return nil
}

func (s *Sim) describeStream(in describeStreamInput) (any, *apiError) {
	if e := s.checkStream(in.StreamArn); e != nil {
		return nil, e
	}
	limit := 100
	if in.Limit != nil {
		if *in.Limit < 1 || *in.Limit > 100 {
			return nil, validation("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value between 1 and 100", *in.Limit)
		}
		limit = *in.Limit
	}
	start := aws.ToString(in.ExclusiveStartShardId)
	desc := streamDescription{
		StreamArn:               s.cfg.StreamARN,
		StreamLabel:             s.streamLabel(),
		StreamStatus:            string(types.StreamStatusEnabled),
		StreamViewType:          string(s.cfg.StreamViewType),
		CreationRequestDateTime: 1767225600, // 2026-01-01T00:00:00Z
		TableName:               s.cfg.TableName,
		Shards:                  []shardOut{},
	}
	for _, k := range s.cfg.KeySchema {
		desc.KeySchema = append(desc.KeySchema, keyElem{AttributeName: aws.ToString(k.AttributeName), KeyType: string(k.KeyType)})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Clock()
	// Shard ids embed a zero-padded creation ordinal, so id order is
	// creation order: parents before children, stable across pages even
	// when shards are trimmed in between.
	i := sort.Search(len(s.shards), func(i int) bool { return s.shards[i].id > start })
	for ; i < len(s.shards); i++ {
		sh := s.shards[i]
		if s.gone(sh, now) {
			continue
		}
		if f := in.ShardFilter; f != nil && f.Type == "CHILD_SHARDS" && sh.parent != f.ShardId {
			continue
		}
		if len(desc.Shards) == limit {
			desc.LastEvaluatedShardId = desc.Shards[limit-1].ShardId
			break
		}
		o := shardOut{ShardId: sh.id, ParentShardId: sh.parent, SequenceNumberRange: seqRange{StartingSequenceNumber: formatSeq(sh.startSeq)}}
		if sh.closed {
			o.SequenceNumberRange.EndingSequenceNumber = formatSeq(max(sh.endSeq, sh.startSeq))
		}
		desc.Shards = append(desc.Shards, o)
	}
	return struct{ StreamDescription streamDescription }{desc}, nil
}

// iterator is a decoded shard iterator: a position in a shard's record
// slice and when it was issued.
type iterator struct {
	shard  string
	pos    int
	issued time.Time
}

func (it iterator) encode() string {
	raw := fmt.Sprintf("%d|%d|%s", it.pos, it.issued.UnixNano(), it.shard)
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func decodeIterator(v string) (iterator, error) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return iterator{}, err
	}
	parts := strings.SplitN(string(raw), "|", 3)
	if len(parts) != 3 {
		return iterator{}, errors.New("malformed")
	}
	pos, err := strconv.Atoi(parts[0])
	if err != nil || pos < 0 {
		return iterator{}, errors.New("bad position")
	}
	ns, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil {
		return iterator{}, errors.New("bad time")
	}
	return iterator{shard: parts[2], pos: pos, issued: time.Unix(0, ns)}, nil
}

func (s *Sim) getShardIterator(in getShardIteratorInput) (any, *apiError) {
	if e := s.checkStream(in.StreamArn); e != nil {
		return nil, e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Clock()
	sh := s.byID[in.ShardId]
	if sh == nil || s.gone(sh, now) {
		return nil, clientErr("ResourceNotFoundException", "Requested resource not found: Shard does not exist")
	}
	trimmed := s.trimmedCount(sh, now)
	var pos int
	switch types.ShardIteratorType(in.ShardIteratorType) {
	case types.ShardIteratorTypeTrimHorizon:
		pos = trimmed
	case types.ShardIteratorTypeLatest:
		pos = len(sh.records)
	case types.ShardIteratorTypeAtSequenceNumber, types.ShardIteratorTypeAfterSequenceNumber:
		if in.SequenceNumber == nil {
			return nil, validation("SequenceNumber is required for ShardIteratorType %s", in.ShardIteratorType)
		}
		n, ok := parseSeq(*in.SequenceNumber)
		if !ok || n > s.nextSeq {
			return nil, validation("Invalid SequenceNumber: %s", *in.SequenceNumber)
		}
		after := types.ShardIteratorType(in.ShardIteratorType) == types.ShardIteratorTypeAfterSequenceNumber
		pos = sort.Search(len(sh.seqs), func(i int) bool {
			if after {
				return sh.seqs[i] > n
			}
			return sh.seqs[i] >= n
		})
		if pos < trimmed {
			return nil, clientErr("TrimmedDataAccessException", "The requested sequence number %s is beyond the trim horizon of shard %s", *in.SequenceNumber, sh.id)
		}
	case types.ShardIteratorTypeAtTimestamp:
		if in.Timestamp == nil {
			return nil, validation("Timestamp is required for ShardIteratorType AT_TIMESTAMP")
		}
		sec, frac := math.Modf(*in.Timestamp)
		at := time.Unix(int64(sec), int64(frac*1e9))
		pos = max(trimmed, sort.Search(len(sh.records), func(i int) bool { return !sh.records[i].at.Before(at) }))
	default:
		return nil, validation("Invalid ShardIteratorType: %q", in.ShardIteratorType)
	}
	return struct{ ShardIterator string }{iterator{shard: sh.id, pos: pos, issued: now}.encode()}, nil
}

func (s *Sim) getRecords(in getRecordsInput) ([]byte, *apiError) {
	limit := s.cfg.MaxRecordsPerCall
	if in.Limit != nil {
		if *in.Limit < 1 || *in.Limit > 1000 {
			return nil, validation("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value between 1 and 1000", *in.Limit)
		}
		limit = min(limit, *in.Limit)
	}
	it, err := decodeIterator(in.ShardIterator)
	if err != nil {
		return nil, validation("Invalid ShardIterator: %v", err)
	}
	s.mu.Lock()
	now := s.cfg.Clock()
	sh := s.byID[it.shard]
	if sh == nil || s.gone(sh, now) {
		s.mu.Unlock()
		return nil, clientErr("ResourceNotFoundException", "Requested resource not found: Shard does not exist")
	}
	if n := s.cfg.ReadsPerSecondPerShard; n > 0 {
		window := now.Add(-time.Second)
		drop := 0
		for drop < len(sh.reads) && !sh.reads[drop].After(window) {
			drop++
		}
		sh.reads = append(sh.reads[:0], sh.reads[drop:]...)
		if len(sh.reads) >= n {
			s.mu.Unlock()
			s.throttled.Add(1)
			return nil, clientErr("LimitExceededException", "Rate exceeded for shard %s", sh.id)
		}
		sh.reads = append(sh.reads, now)
	}
	if now.Sub(it.issued) > s.cfg.IteratorTTL {
		s.mu.Unlock()
		return nil, clientErr("ExpiredIteratorException", "Iterator expired. The iterator was created at time %s while right now it is %s which is further in the future than the tolerated delay of %d milliseconds.",
			it.issued.UTC().Format(time.RFC1123), now.UTC().Format(time.RFC1123), s.cfg.IteratorTTL.Milliseconds())
	}
	if it.pos > len(sh.records) {
		s.mu.Unlock()
		return nil, validation("Invalid ShardIterator: position beyond the shard")
	}
	if it.pos < s.trimmedCount(sh, now) {
		s.mu.Unlock()
		return nil, clientErr("TrimmedDataAccessException", "The iterator of shard %s points at records beyond the trim horizon", sh.id)
	}
	end := min(len(sh.records), it.pos+limit)
	recs := append([]*stored(nil), sh.records[it.pos:end]...)
	next := ""
	if !sh.closed || end < len(sh.records) {
		next = iterator{shard: sh.id, pos: end, issued: now}.encode()
	}
	s.mu.Unlock()
	s.served.Add(int64(len(recs)))

	size := 64
	for _, r := range recs {
		size += len(r.wire) + 1
	}
	b := make([]byte, 0, size+len(next))
	if next != "" {
		b = appendString(append(b, `{"NextShardIterator":`...), next)
		b = append(b, `,"Records":[`...)
	} else {
		b = append(b, `{"Records":[`...)
	}
	for i, r := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, r.wire...)
	}
	return append(b, "]}"...), nil
}

func (s *Sim) listStreams(in listStreamsInput) (any, *apiError) {
	if in.Limit != nil && (*in.Limit < 1 || *in.Limit > 100) {
		return nil, validation("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value between 1 and 100", *in.Limit)
	}
	streams := []streamOut{}
	if (in.TableName == nil || *in.TableName == s.cfg.TableName) && aws.ToString(in.ExclusiveStartStreamArn) < s.cfg.StreamARN {
		streams = append(streams, streamOut{StreamArn: s.cfg.StreamARN, TableName: s.cfg.TableName, StreamLabel: s.streamLabel()})
	}
	return struct{ Streams []streamOut }{streams}, nil
}
