package pylogq.spark.jvm;

import java.io.Closeable;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One split's records, read from its partition directory's segment files in offset order: the
 * JVM twin of the Python reader's walk ({@code pylogq.spark.splits._iter_columns}).
 *
 * <p>Walks the segments from the one holding the split's start, listing the directory again
 * whenever a file has moved (retention, a compaction swap) or the last listed segment is done
 * (a newer one may have rolled). A segment opened stays readable even if the broker deletes it
 * meanwhile. Each segment is read from its offset index's entry before the next offset wanted
 * up to the batch holding the split's last offset, and the walk stops where the readable data
 * ends (a batch being written, a preallocated zero tail). Records deleted before they were read
 * fail the read with a {@link DataLossException}, or are skipped with a warning. Control batches
 * are never rows, and a read_committed split's batches of its aborted transactions are skipped
 * unread ({@link Split#aborted}).
 */
final class SegmentWalk implements Closeable {
    private static final Logger LOG = LoggerFactory.getLogger(SegmentWalk.class);
    private static final int OPEN_RETRIES = 100;
    private static final String LOG_START_CHECKPOINT = "log-start-offset-checkpoint";

    /** A segment: its base offset and its {@code .log} file (or {@code .log.swap} mid-swap). */
    static final class Segment {
        final long base;
        final String path;

        Segment(long base, String path) {
            this.base = base;
            this.path = path;
        }
    }

    private final Split split;
    private final boolean fail;
    private final boolean headersOnly;
    private final long minTimestamp;
    private final int chunkBytes;
    private final ChunkPool pool;
    private final long end;
    private final boolean hasAborted;
    private long position;
    private List<Segment> segments;
    private int k;
    private int retries;
    private boolean done;

    // The open segment.
    private FileChannel channel;
    private Segment segment;
    private long readFrom;  // the offset the segment is read from: records below it are not wanted
    private long filePos;   // the file position of the next entry not yet read into a chunk
    private long limit;     // the position past the last batch that can hold a wanted offset
    private byte[] chunk;   // whole entries read from the file, from chunkPos
    private int chunkLen;
    private int chunkAt;    // the next entry's position in chunk
    private boolean chunkReachesLimit;
    private final ByteBuffer head = ByteBuffer.allocate(Entries.V2_HEADER);

    /**
     * @param minTimestamp the rows' lower timestamp bound (Long.MIN_VALUE: none): each segment is
     *     read from the first offset its time index allows to be at or after it
     */
    SegmentWalk(Split split, boolean failOnDataLoss, boolean headersOnly, long minTimestamp, int chunkBytes,
                ChunkPool pool) {
        this.split = split;
        this.fail = failOnDataLoss;
        this.headersOnly = headersOnly;
        this.minTimestamp = minTimestamp;
        this.chunkBytes = chunkBytes;
        this.pool = pool;
        this.end = split.end;
        this.hasAborted = split.hasAborted();
        this.position = split.start;
        if (!locate(split.start)) {
            done = true;
        }
    }

    /**
     * Decodes records into {@code rows} until it holds {@code want} or more, or the split is
     * read; false when the split is read (rows may then hold its last records).
     */
    boolean fill(Rows rows, int want) {
        while (!done) {
            if (channel == null && !open()) {
                done = true;
                break;
            }
            boolean more = headersOnly ? readHeaders(rows, want) : readChunks(rows, want);
            if (done || position >= end) {
                done = true;
                break;
            }
            if (!more) {
                closeSegment();
                advance();
            }
            if (rows.size >= want) {
                return !done;
            }
        }
        closeSegment();
        return false;
    }

    @Override
    public void close() {
        closeSegment();
        done = true;
    }

    // -- listing and losses ------------------------------------------------------------------

    /** The segments of a partition directory by base offset; null when the directory is gone. */
    static List<Segment> listSegments(String directory) {
        String[] names = new File(directory).list();
        if (names == null) {
            if (!new File(directory).exists()) {
                return null;
            }
            throw new UncheckedIOException(new IOException("cannot list partition directory " + directory));
        }
        TreeMap<Long, String> logs = new TreeMap<>();
        TreeMap<Long, String> swaps = new TreeMap<>();
        for (String name : names) {
            TreeMap<Long, String> target;
            if (name.endsWith(".log")) {
                target = logs;
            } else if (name.endsWith(".log.swap")) {
                target = swaps;
            } else {
                continue;
            }
            int dot = name.indexOf('.');
            String stem = name.substring(0, dot);
            if (stem.length() != 20 || !stem.chars().allMatch(c -> c >= '0' && c <= '9')) {
                continue;
            }
            long base;
            try {
                base = Long.parseLong(stem);
            } catch (NumberFormatException e) {
                continue;  // (past Long.MAX_VALUE: no segment of a Kafka log)
            }
            target.put(base, new File(directory, name).getPath());
        }
        swaps.forEach(logs::putIfAbsent);
        List<Segment> out = new ArrayList<>(logs.size());
        logs.forEach((base, path) -> out.add(new Segment(base, path)));
        return out;
    }

    /** The partition's entry in its log directory's log start checkpoint; null when absent. */
    private Long checkpointedLogStart() {
        Path path = Paths.get(split.directory).toAbsolutePath().getParent().resolve(LOG_START_CHECKPOINT);
        List<String> lines;
        try {
            lines = Files.readAllLines(path, StandardCharsets.UTF_8);
        } catch (NoSuchFileException e) {
            return null;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + path + ": " + e.getMessage(), e);
        }
        if (lines.isEmpty()) {
            return null;
        }
        if (lines.size() < 2 || !lines.get(0).trim().equals("0")) {
            throw new IllegalStateException("corrupt checkpoint file " + path + ": no version 0 and count");
        }
        String wantedTopic = split.topic;
        String wantedPartition = Integer.toString(split.partition);
        for (int i = 2; i < lines.size(); i++) {
            String[] tokens = lines.get(i).trim().split(" ");
            if (tokens.length == 3 && tokens[0].equals(wantedTopic) && tokens[1].equals(wantedPartition)) {
                try {
                    return Long.parseLong(tokens[2]);
                } catch (NumberFormatException e) {
                    throw new IllegalStateException("corrupt checkpoint file " + path + " line " + (i + 1)
                            + ": offset " + tokens[2] + " is not a number");
                }
            }
        }
        return null;
    }

    private long logStart(List<Segment> list) {
        long first = list.isEmpty() ? 0 : list.get(0).base;
        Long checkpointed = checkpointedLogStart();
        return Math.max(first, checkpointed == null ? 0 : checkpointed);
    }

    private void lost(long from, long to, long logStart, String why) {
        String reason = why != null ? why
                : "the log start is now " + logStart + " (retention or DeleteRecords)";
        String message = "offsets " + from + ".." + (to - 1) + " of " + split.name()
                + " were deleted before they could be read: " + reason;
        if (fail) {
            throw new DataLossException(message + "; read with fail_on_data_loss=False to skip them");
        }
        LOG.warn("skipping lost records: {}; skipped (fail_on_data_loss=False)", message);
    }

    /** The segments now; null (after reporting the loss) when the partition directory is gone. */
    private List<Segment> listForRead(long from) {
        List<Segment> found = listSegments(split.directory);
        if (found == null) {
            lost(from, end, -1, "the partition directory " + split.directory + " no longer exists (topic deleted?)");
        }
        return found;
    }

    /** The first offset to read at or after {@code from}: past records deleted before it (reported). */
    private long skipLost(List<Segment> list, long from) {
        long logStart = list.isEmpty() ? end : logStart(list);
        if (from < logStart) {
            long lostEnd = Math.min(logStart, end);
            lost(from, lostEnd, logStart, null);
            return lostEnd;
        }
        return from;
    }

    private static int segmentFor(List<Segment> list, long offset) {
        for (int i = list.size() - 1; i >= 0; i--) {
            if (list.get(i).base <= offset) {
                return i;
            }
        }
        return -1;
    }

    /** Lists the segments again and finds the one holding {@code from}; false when nothing is left to read. */
    private boolean locate(long from) {
        List<Segment> found = listForRead(from);
        if (found == null) {
            return false;
        }
        segments = found;
        position = skipLost(found, from);
        k = segmentFor(found, position);
        return true;
    }

    /** After a segment is read to its end: the next one, listing again past the last one listed. */
    private void advance() {
        Segment last = segments.get(k);
        if (k + 1 < segments.size()) {
            k++;
            return;
        }
        List<Segment> found = listForRead(position);
        if (found == null) {
            done = true;
            return;
        }
        segments = found;
        int later = -1;
        for (int i = 0; i < found.size(); i++) {
            if (found.get(i).base > last.base) {
                later = i;
                break;
            }
        }
        if (later < 0) {
            done = true;  // the rest of the range holds no records (compaction gaps, control batches)
            return;
        }
        k = later;
        // Offsets below the next segment's base after a segment read to its end hold no records:
        // only records at or past that base can have been lost.
        long expectedFrom = Math.max(position, found.get(k).base);
        long checked = skipLost(found, expectedFrom);
        if (checked > expectedFrom) {
            position = checked;
            k = segmentFor(found, position);
        }
    }

    // -- one segment -------------------------------------------------------------------------

    /** Opens the segment holding {@code position}, looking again while files move; false when none is left. */
    private boolean open() {
        while (position < end) {
            if (minTimestamp != Long.MIN_VALUE && k >= 0) {
                // Records below the time index's bound are all older than the rows wanted: not read.
                position = Math.max(position, OffsetIndex.firstOffsetFrom(segments.get(k), minTimestamp));
                if (position >= end) {
                    return false;
                }
                if (k + 1 < segments.size() && position >= segments.get(k + 1).base) {
                    k++;
                    continue;
                }
            }
            FileChannel opened = null;
            if (k >= 0) {
                try {
                    opened = FileChannel.open(Paths.get(segments.get(k).path), StandardOpenOption.READ);
                } catch (NoSuchFileException e) {
                    opened = null;  // renamed since the listing (retention, or a compaction swap)
                } catch (IOException e) {
                    throw new UncheckedIOException("cannot read segment " + segments.get(k).path + ": "
                            + e.getMessage(), e);
                }
            }
            if (opened != null) {
                try {
                    start(opened, segments.get(k));
                } catch (IOException e) {
                    try {
                        opened.close();
                    } catch (IOException ignored) {
                        // (already failing)
                    }
                    throw new UncheckedIOException("cannot read segment " + segments.get(k).path + ": "
                            + e.getMessage(), e);
                }
                return true;
            }
            retries++;
            if (retries > OPEN_RETRIES) {
                throw new IllegalStateException(split.directory + ": segment files keep moving; cannot find the one"
                        + " holding offset " + position);
            }
            if (!locate(position)) {
                return false;
            }
        }
        return false;
    }

    private void start(FileChannel opened, Segment seg) throws IOException {
        channel = opened;
        segment = seg;
        long size = opened.size();
        OffsetIndex index = OffsetIndex.read(seg, size);
        readFrom = position;
        filePos = startPosition(index, position, size);
        limit = endPosition(index, end, size);
        chunk = null;
        chunkLen = 0;
        chunkAt = 0;
        chunkReachesLimit = false;
    }

    private void closeSegment() {
        if (channel != null) {
            try {
                channel.close();
            } catch (IOException ignored) {
                // read-only: nothing to lose
            }
            channel = null;
            chunk = null;
        }
    }

    /**
     * The header of the whole entry at {@code at} ending by {@code bound}, in {@link #head}; false
     * when none is there: the end, an entry cut short by {@code bound} or still being written, a
     * zero-filled tail, or (unless {@code strict}, which throws instead) malformed bytes.
     */
    private boolean headerAt(long at, long bound, boolean strict) throws IOException {
        head.clear();
        while (head.hasRemaining()) {
            int n = channel.read(head, at + head.position());
            if (n < 0) {
                break;
            }
        }
        int n = head.position();
        byte[] h = head.array();
        if (n < 17) {
            return false;
        }
        boolean zeros = true;
        for (int i = 0; i < 17 && zeros; i++) {
            zeros = h[i] == 0;
        }
        if (zeros) {
            return false;  // the zeros past a preallocated file's data
        }
        int magic = h[16];
        long size = Entries.LOG_OVERHEAD + (long) Entries.readInt(h, 8);
        long least = magic == 0 ? 26 : magic == 1 ? 34 : Entries.V2_HEADER;
        if (magic < 0 || magic > 2 || size < least) {
            if (strict) {
                if (magic < 0 || magic > 2) {
                    throw corrupt(at, CorruptRecordException.Kind.BAD_MAGIC, "unknown magic " + magic);
                }
                throw corrupt(at, CorruptRecordException.Kind.BAD_LENGTH,
                              "a length of " + (size - Entries.LOG_OVERHEAD) + ", too small for magic " + magic);
            }
            return false;
        }
        return at + size <= bound && (n >= Entries.V2_HEADER || n >= size);
    }

    private CorruptRecordException corrupt(long at, CorruptRecordException.Kind kind, String what) {
        return new CorruptRecordException(kind, "segment " + segment.path + " cannot be read past byte " + at
                + ": the entry there has " + what);
    }

    /** Where to scan from for {@code target}: past the index entry's batch when that batch ends below it. */
    private long startPosition(OffsetIndex index, long target, long size) throws IOException {
        int i = index.floor(target);
        if (i < 0) {
            return 0;
        }
        long at = index.positions[i];
        if (!headerAt(at, size, false) || Entries.lastOffset(head.array(), 0) != index.offsets[i]) {
            return 0;  // an index that does not match its log: scan the segment from its start
        }
        if (Entries.lastOffset(head.array(), 0) < target) {
            return at + Entries.LOG_OVERHEAD + Entries.readInt(head.array(), 8);
        }
        return at;
    }

    /** A position past every batch holding an offset below {@code to} (the file size at worst). */
    private long endPosition(OffsetIndex index, long to, long size) throws IOException {
        int i = index.ceiling(to);
        if (i >= index.size) {
            return size;
        }
        long at = index.positions[i];
        if (!headerAt(at, size, false) || Entries.lastOffset(head.array(), 0) != index.offsets[i]) {
            return size;
        }
        return at + Entries.LOG_OVERHEAD + Entries.readInt(head.array(), 8);
    }

    /** Whether the v2 batch at data[pos] is a transactional data batch of one of the split's aborted transactions. */
    private boolean aborted(byte[] data, int pos) {
        if (!Entries.isTransactional(data, pos) || Entries.isControl(data, pos)) {
            return false;
        }
        return split.aborted(Entries.producerId(data, pos), Entries.baseOffset(data, pos),
                Entries.lastOffset(data, pos));
    }

    private void advanced(Rows rows) {
        if (rows.lastOffered >= 0) {
            position = Math.max(position, rows.lastOffered + 1);
        }
    }

    /** Decodes whole entries chunk by chunk; false when the segment is read to its readable end. */
    private boolean readChunks(Rows rows, int want) {
        try {
            while (true) {
                if (chunk == null || chunkAt >= chunkLen) {
                    if (!nextChunk(0)) {
                        return false;
                    }
                }
                int at = chunkAt;
                if (chunkLen - at < Entries.LOG_OVERHEAD + 5) {
                    if (chunkReachesLimit || !nextChunk(0)) {
                        return false;
                    }
                    continue;
                }
                long declared = Entries.LOG_OVERHEAD + (long) Entries.readInt(chunk, at + 8);
                int size;
                try {
                    // The entry's magic and size checked as if it were whole here: bad ones fail the read
                    // even when the size runs past what is read.
                    size = Entries.frame(chunk, at, (int) Math.min(Integer.MAX_VALUE,
                            at + Math.max(declared, Entries.LOG_OVERHEAD + 5)));
                } catch (CorruptRecordException e) {
                    throw new CorruptRecordException(e.kind(), "segment " + segment.path + " cannot be read past byte "
                            + (filePos - chunkLen + at) + ": " + e.getMessage(), e);
                }
                if (size == 0) {
                    return false;  // a zero-filled tail: the readable data ends here
                }
                if (size > chunkLen - at) {
                    // Not whole in this chunk: read it again from its start, whole, unless it runs past the
                    // limit (a batch still being written, or cut short by the end of the read).
                    if (chunkReachesLimit || filePos - (chunkLen - at) + size > limit || !nextChunk(size)) {
                        return false;
                    }
                    continue;
                }
                int magic = Entries.magic(chunk, at);
                if (magic == 2 && Entries.baseOffset(chunk, at) >= end) {
                    done = true;
                    return false;
                }
                chunkAt = at + size;
                if (magic == 2 && Entries.lastOffset(chunk, at) < readFrom) {
                    continue;
                }
                if (magic == 2 && hasAborted && aborted(chunk, at)) {
                    continue;  // a batch of an aborted transaction (read_committed)
                }
                rows.lastOffered = -1;
                Entries.decode(chunk, at, size, readFrom, end, rows);
                advanced(rows);
                if (position >= end) {
                    done = true;
                    return false;
                }
                if (rows.size >= want) {
                    return true;
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read segment " + segment.path + ": " + e.getMessage(), e);
        }
    }

    /** The array of the chunk being decoded (null: none), which rows of the next batch may point into. */
    byte[] currentChunk() {
        return chunk;
    }

    /**
     * Reads the next chunk from the first entry not yet decoded: about {@code chunkBytes}, at
     * least {@code atLeast}, never past the limit. Never into the array of the previous chunk:
     * rows of the batch being filled may point into it. False when nothing is left to read.
     */
    private boolean nextChunk(int atLeast) throws IOException {
        long from = chunk == null ? filePos : filePos - (chunkLen - chunkAt);
        long remain = limit - from;
        if (remain <= 0) {
            return false;
        }
        int n = (int) Math.min(Math.max(chunkBytes, atLeast), remain);
        byte[] data = pool.take(n);
        ByteBuffer target = ByteBuffer.wrap(data, 0, n);
        while (target.hasRemaining()) {
            int got = channel.read(target, from + target.position());
            if (got < 0) {
                break;  // the file shrank under the read: what was read is what there is
            }
        }
        int got = target.position();
        if (got == 0 || (chunk != null && got <= chunkLen - chunkAt)) {
            return false;  // nothing more than was already read: the file shrank under the read
        }
        chunk = data;
        chunkLen = got;
        chunkAt = 0;
        filePos = from + got;
        chunkReachesLimit = filePos >= limit || got < n;
        return true;
    }

    /**
     * The offset columns from batch headers where they suffice (a v2 batch whose record count
     * fills its offset range); any other entry is read and decoded. False at the segment's end.
     */
    private boolean readHeaders(Rows rows, int want) {
        try {
            while (filePos < limit) {
                long at = filePos;
                if (!headerAt(at, limit, true)) {
                    return false;
                }
                byte[] h = head.array();
                int size = (int) (Entries.LOG_OVERHEAD + Entries.readInt(h, 8));
                int magic = h[16];
                long last = Entries.lastOffset(h, 0);
                filePos = at + size;
                if (last < readFrom) {
                    continue;
                }
                if (magic == 2 && Entries.baseOffset(h, 0) >= end) {
                    done = true;
                    return false;
                }
                if (magic == 2 && Entries.isControl(h, 0)) {
                    continue;  // a control batch: no data records
                }
                if (magic == 2 && hasAborted && aborted(h, 0)) {
                    continue;  // a batch of an aborted transaction (read_committed)
                }
                rows.lastOffered = -1;
                long base = Entries.baseOffset(h, 0);
                if (magic == 2 && Entries.recordsCount(h, 0) == last - base + 1) {
                    rows.offsets(Math.max(base, readFrom), Math.min(last + 1, end));
                } else {
                    byte[] data = new byte[size];
                    ByteBuffer target = ByteBuffer.wrap(data);
                    while (target.hasRemaining()) {
                        if (channel.read(target, at + target.position()) < 0) {
                            return false;  // the file shrank under the read
                        }
                    }
                    Entries.decode(data, 0, size, readFrom, end, new OffsetsOnly(rows));
                }
                advanced(rows);
                if (last >= end - 1) {
                    done = true;
                    return false;
                }
                if (rows.size >= want) {
                    return true;
                }
            }
            return false;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read segment " + segment.path + ": " + e.getMessage(), e);
        }
    }

    /** A sink keeping only each record's offset (reads of the offset columns). */
    private static final class OffsetsOnly implements RecordSink {
        private final Rows rows;

        OffsetsOnly(Rows rows) {
            this.rows = rows;
        }

        @Override
        public void record(long offset, long timestamp, int timestampType, byte[] buf, int keyPos, int keyLen,
                           int valuePos, int valueLen, int headersPos, int headerCount) {
            rows.offsets(offset, offset + 1);
        }
    }
}
