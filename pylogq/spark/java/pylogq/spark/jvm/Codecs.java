package pylogq.spark.jvm;

import com.github.luben.zstd.Zstd;
import com.github.luben.zstd.ZstdDecompressCtx;
import com.github.luben.zstd.ZstdException;
import com.github.luben.zstd.ZstdInputStreamNoFinalizer;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.util.Arrays;
import java.util.zip.CRC32;
import java.util.zip.DataFormatException;
import java.util.zip.Inflater;
import net.jpountz.lz4.LZ4Exception;
import net.jpountz.lz4.LZ4Factory;
import net.jpountz.lz4.LZ4SafeDecompressor;
import net.jpountz.xxhash.XXHash32;
import net.jpountz.xxhash.XXHashFactory;
import org.xerial.snappy.Snappy;
import pylogq.spark.jvm.CorruptRecordException.Kind;

/**
 * The compression codecs of Kafka record batches and message sets, decompressing as
 * {@code pylogq.records.codecs.decompress} does, with the framing quirks real clients write:
 *
 * <ul>
 * <li>1 gzip: gzip members one after another (zlib streams too, as zlib's automatic header
 *     detection reads them), each member's CRC-32 and length checked.
 * <li>2 snappy: xerial's framing ({@code \x82SNAPPY\0}, two int32 versions, then [int32 length]
 *     [raw block] repeated), as the Java client writes it, or one raw snappy block.
 * <li>3 lz4: one LZ4 frame, linked or independent blocks, with its optional checksums and content
 *     size; bytes after the frame are ignored. For magic 0, Kafka 0.8 computed the header checksum
 *     over the magic number too (KAFKA-3160), so a magic 0 frame's header checksum is not checked.
 *     A skippable frame where the frame should be reads as an empty payload, as liblz4 reads it.
 * <li>4 zstd: zstd frames one after another (skippable ones skipped), with or without a declared
 *     content size.
 * </ul>
 *
 * No payload decompresses to more than the bound its caller gives: a larger output is a
 * {@link CorruptRecordException}, found while decompressing, so no more than about the bound is
 * ever allocated (a small payload can stand for a thousand times its size or far more).
 * Stateless; any number of threads may call it at once.
 */
final class Codecs {
    static final int MAX_DECOMPRESSED = 1 << 30;

    static final int NONE = 0;
    static final int GZIP = 1;
    static final int SNAPPY = 2;
    static final int LZ4 = 3;
    static final int ZSTD = 4;
    private static final String[] NAMES = {"none", "gzip", "snappy", "lz4", "zstd"};

    private static final LZ4SafeDecompressor LZ4_BLOCKS = LZ4Factory.fastestInstance().safeDecompressor();
    private static final XXHash32 XXHASH = XXHashFactory.fastestInstance().hash32();
    private static final int LZ4_MAGIC = 0x184D2204;
    private static final int LZ4_SKIPPABLE_MAGIC = 0x184D2A50;  // the low 4 bits are free
    private static final byte[] XERIAL_MAGIC = {(byte) 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
    private static final int XERIAL_HEADER = XERIAL_MAGIC.length + 8;
    /** deflate's largest ratio is about 1032:1: a gzip length field claiming more is a lie. */
    private static final int DEFLATE_MAX_RATIO = 1032;
    /** snappy's largest ratio: a 3-byte copy makes 64 bytes. */
    private static final int SNAPPY_MAX_RATIO = 22;
    /** lz4's largest ratio: each byte of a match length's extension adds 255 bytes. */
    private static final int LZ4_MAX_RATIO = 255;
    /**
     * A zstd frame that declares its size is decompressed in one call into an array of that
     * size when it is at most this, or at most {@link #ZSTD_TRUSTED_RATIO} times the payload;
     * otherwise it is streamed, so that a small frame declaring a large size (a zstd block can
     * stand for 32,768 times its size) costs memory only for what it really holds.
     */
    private static final int ZSTD_TRUSTED_SIZE = 8 << 20;
    private static final int ZSTD_TRUSTED_RATIO = 256;
    private static final int MIN_CAPACITY = 4096;
    /** The largest array a JVM allocates, less one: output is held in one array, up to maxSize + 1 bytes. */
    private static final int MAX_BOUND = Integer.MAX_VALUE - 9;

    private Codecs() {
    }

    /** Decompressed bytes: {@code bytes[0, length)}; the array may be longer. */
    static final class Section {
        final byte[] bytes;
        final int length;

        Section(byte[] bytes, int length) {
            this.bytes = bytes;
            this.length = length;
        }
    }

    /**
     * data[off, off + len) decompressed with codec (1 gzip, 2 snappy, 3 lz4, 4 zstd; 0 returns a
     * copy). Bad or truncated data, an unknown codec (5-7), or more than maxSize bytes of output
     * raise CorruptRecordException. {@code magic} is the format the payload came in (0 and 1:
     * a v0/v1 wrapper's value; 2: a v2 batch's records).
     */
    static byte[] decompress(int codec, byte[] data, int off, int len, int magic, int maxSize) {
        Section section = decompressSection(codec, data, off, len, magic, maxSize);
        return section.length == section.bytes.length ? section.bytes : Arrays.copyOf(section.bytes, section.length);
    }

    /** {@link #decompress}, without trimming the output array to its length. */
    static Section decompressSection(int codec, byte[] data, int off, int len, int magic, int maxSize) {
        if (off < 0 || len < 0 || len > data.length - off || maxSize < 0) {
            throw new IllegalArgumentException(String.format(
                "no %d bytes at byte %d of %d (bound %d)", len, off, data.length, maxSize));
        }
        maxSize = Math.min(maxSize, MAX_BOUND);
        switch (codec) {
            case NONE:
                return new Section(Arrays.copyOfRange(data, off, off + len), len);
            case GZIP:
                return gzip(data, off, len, maxSize);
            case SNAPPY:
                return snappy(data, off, len, maxSize);
            case LZ4:
                return lz4(data, off, len, magic, maxSize);
            case ZSTD:
                return zstd(data, off, len, maxSize);
            default:
                throw new CorruptRecordException(Kind.UNKNOWN_CODEC, String.format(
                    "attributes name compression codec %d, which does not exist", codec));
        }
    }

    private static CorruptRecordException tooLarge(int codec, int maxSize) {
        return new CorruptRecordException(Kind.TOO_LARGE_DECOMPRESSED, String.format(
            "%s payload decompresses to more than %d bytes", NAMES[codec], maxSize));
    }

    private static CorruptRecordException corrupt(int codec, String detail) {
        return new CorruptRecordException(Kind.BAD_COMPRESSED_DATA, NAMES[codec] + " payload does not decompress: "
                                          + detail);
    }

    /** A new capacity for output that has reached {@code length} bytes and wants {@code need} more: at most maxSize + 1. */
    private static int grow(int length, long need, int maxSize) {
        long target = Math.max(Math.max(2L * length, length + need), MIN_CAPACITY);
        return (int) Math.min(target, maxSize + 1L);
    }

    // -- gzip ---------------------------------------------------------------------------------

    private static final int FHCRC = 0x02;
    private static final int FEXTRA = 0x04;
    private static final int FNAME = 0x08;
    private static final int FCOMMENT = 0x10;

    private static Section gzip(byte[] src, int off, int len, int maxSize) {
        int end = off + len;
        // The last member's length field (mod 2^32) sizes the output: right for one member.
        long hint = MIN_CAPACITY;
        if (len >= 18 && isGzip(src, off, end)) {
            hint = Math.max(hint, Math.min(readIntLE(src, end - 4) & 0xFFFFFFFFL, (long) len * DEFLATE_MAX_RATIO));
        }
        byte[] out = new byte[(int) Math.min(hint, maxSize + 1L)];
        int total = 0;
        byte[] one = new byte[1];
        int p = off;
        try {
            while (p < end) {
                boolean gz = isGzip(src, p, end);
                int body = gz ? gzipHeaderEnd(src, p, end) : p;
                int memberStart = total;
                Inflater inflater = new Inflater(gz);
                try {
                    inflater.setInput(src, body, end - body);
                    while (!inflater.finished()) {
                        int n;
                        if (total < out.length) {
                            n = inflater.inflate(out, total, out.length - total);
                            total += n;
                        } else {
                            // Full: one more byte says whether the member ends here, without growing.
                            n = inflater.inflate(one, 0, 1);
                            if (n > 0) {
                                if (total >= maxSize) {
                                    throw tooLarge(GZIP, maxSize);
                                }
                                out = Arrays.copyOf(out, grow(out.length, 1, maxSize));
                                out[total++] = one[0];
                            }
                        }
                        if (total > maxSize) {
                            throw tooLarge(GZIP, maxSize);
                        }
                        if (n == 0 && !inflater.finished()) {
                            if (inflater.needsDictionary()) {
                                throw corrupt(GZIP, "it needs a preset dictionary");
                            }
                            if (inflater.needsInput()) {
                                throw new CorruptRecordException(Kind.BAD_COMPRESSED_DATA, "gzip payload is truncated");
                            }
                        }
                    }
                    p = end - inflater.getRemaining();
                } finally {
                    inflater.end();
                }
                if (gz) {
                    if (end - p < 8) {
                        throw new CorruptRecordException(Kind.BAD_COMPRESSED_DATA, "gzip payload is truncated");
                    }
                    CRC32 crc = new CRC32();
                    crc.update(out, memberStart, total - memberStart);
                    if ((int) crc.getValue() != readIntLE(src, p)) {
                        throw corrupt(GZIP, "incorrect data check");
                    }
                    if (total - memberStart != readIntLE(src, p + 4)) {
                        throw corrupt(GZIP, "incorrect length check");
                    }
                    p += 8;
                }
            }
        } catch (DataFormatException e) {
            throw corrupt(GZIP, String.valueOf(e.getMessage()));
        }
        return new Section(out, total);
    }

    private static boolean isGzip(byte[] src, int p, int end) {
        return end - p >= 2 && src[p] == 0x1f && src[p + 1] == (byte) 0x8b;
    }

    /** Where the deflate data of the gzip member at src[p] starts (RFC 1952), its header checked. */
    private static int gzipHeaderEnd(byte[] src, int p, int end) {
        if (end - p < 10) {
            throw new CorruptRecordException(Kind.BAD_COMPRESSED_DATA, "gzip payload is truncated");
        }
        if (src[p + 2] != 8) {
            throw corrupt(GZIP, "unknown compression method");
        }
        int flags = src[p + 3] & 0xFF;
        if ((flags & 0xE0) != 0) {
            throw corrupt(GZIP, "unknown header flags set");
        }
        long q = p + 10;
        if ((flags & FEXTRA) != 0) {
            if (end - q < 2) {
                throw new CorruptRecordException(Kind.BAD_COMPRESSED_DATA, "gzip payload is truncated");
            }
            q += 2 + ((src[(int) q] & 0xFF) | (src[(int) q + 1] & 0xFF) << 8);
        }
        if ((flags & FNAME) != 0) {
            q = afterZero(src, q, end);
        }
        if ((flags & FCOMMENT) != 0) {
            q = afterZero(src, q, end);
        }
        if ((flags & FHCRC) != 0) {
            if (end - q < 2) {
                throw new CorruptRecordException(Kind.BAD_COMPRESSED_DATA, "gzip payload is truncated");
            }
            CRC32 crc = new CRC32();
            crc.update(src, p, (int) q - p);
            int stored = (src[(int) q] & 0xFF) | (src[(int) q + 1] & 0xFF) << 8;
            if (((int) crc.getValue() & 0xFFFF) != stored) {
                throw corrupt(GZIP, "header crc mismatch");
            }
            q += 2;
        }
        if (q > end) {
            throw new CorruptRecordException(Kind.BAD_COMPRESSED_DATA, "gzip payload is truncated");
        }
        return (int) q;
    }

    /** The position after the zero byte that ends the string at src[q] (past end when there is none). */
    private static long afterZero(byte[] src, long q, int end) {
        while (q < end && src[(int) q] != 0) {
            q++;
        }
        return q + 1;
    }

    // -- snappy -------------------------------------------------------------------------------

    private static Section snappy(byte[] src, int off, int len, int maxSize) {
        int end = off + len;
        if (len < XERIAL_HEADER || !Arrays.equals(src, off, off + XERIAL_MAGIC.length, XERIAL_MAGIC, 0,
                                                    XERIAL_MAGIC.length)) {
            long declared = snappyLength(src, off, end);
            if (declared > maxSize) {
                throw tooLarge(SNAPPY, maxSize);
            }
            checkSnappyRatio(declared, len);
            byte[] out = new byte[(int) declared];
            snappyBlock(src, off, len, out, 0);
            return new Section(out, out.length);
        }
        // Every block's declared length first: the output is allocated once, at its size.
        long total = 0;
        int p = off + XERIAL_HEADER;
        while (p < end) {
            int n = xerialBlock(src, p, end);
            long declared = snappyLength(src, p + 4, p + 4 + n);
            total += declared;
            if (total > maxSize) {
                throw tooLarge(SNAPPY, maxSize);
            }
            checkSnappyRatio(declared, n);
            p += 4 + n;
        }
        byte[] out = new byte[(int) total];
        int o = 0;
        for (p = off + XERIAL_HEADER; p < end; ) {
            int n = Entries.readInt(src, p);
            o += snappyBlock(src, p + 4, n, out, o);
            p += 4 + n;
        }
        return new Section(out, o);
    }

    /** A block's declared length must be one its bytes can hold: the output is allocated at that length. */
    private static void checkSnappyRatio(long declared, int n) {
        if (declared > (long) SNAPPY_MAX_RATIO * n + 64) {
            throw corrupt(SNAPPY, "a block of " + n + " bytes declares " + declared + ", more than it can hold");
        }
    }

    /** The size of the xerial block whose length field is at src[p], checked to lie before end. */
    private static int xerialBlock(byte[] src, int p, int end) {
        if (end - p < 4) {
            throw new CorruptRecordException(Kind.BAD_COMPRESSED_DATA, "xerial snappy block length is truncated");
        }
        int n = Entries.readInt(src, p);
        if (n < 0 || n > end - p - 4) {
            throw new CorruptRecordException(Kind.BAD_COMPRESSED_DATA,
                                             "xerial snappy block of " + n + " bytes overruns the payload");
        }
        return n;
    }

    /** The uncompressed length a raw snappy block at src[p, end) declares in its varint preamble. */
    private static long snappyLength(byte[] src, int p, int end) {
        long result = 0;
        for (int i = 0; i < 5 && p + i < end; i++) {
            int b = src[p + i];
            result |= (long) (b & 0x7F) << (7 * i);
            if (b >= 0) {
                return result;
            }
        }
        throw new CorruptRecordException(Kind.BAD_COMPRESSED_DATA, "snappy block has a malformed length preamble");
    }

    /** Decompresses the raw block src[p, p + n) into out[o, ...), which has room for its declared length. */
    private static int snappyBlock(byte[] src, int p, int n, byte[] out, int o) {
        long declared = snappyLength(src, p, p + n);
        if (declared > out.length - o) {
            throw new IllegalStateException("no room for a snappy block of " + declared + " bytes");
        }
        int written;
        try {
            written = Snappy.uncompress(src, p, n, out, o);
        } catch (IOException e) {
            throw corrupt(SNAPPY, String.valueOf(e.getMessage()));
        }
        if (written != declared) {
            throw corrupt(SNAPPY, "a block of " + written + " bytes declares " + declared);
        }
        return written;
    }

    // -- lz4 ----------------------------------------------------------------------------------

    private static final int FLG_DICT_ID = 0x01;
    private static final int FLG_RESERVED = 0x02;
    private static final int FLG_CONTENT_CHECKSUM = 0x04;
    private static final int FLG_CONTENT_SIZE = 0x08;
    private static final int FLG_BLOCK_CHECKSUM = 0x10;
    private static final int FLG_BLOCK_INDEPENDENT = 0x20;
    private static final int STORED_BLOCK = 0x80000000;

    private static Section lz4(byte[] src, int off, int len, int magic, int maxSize) {
        int end = off + len;
        if (len < 7) {
            throw new CorruptRecordException(Kind.BAD_COMPRESSED_DATA,
                                             "lz4 frame of " + len + " bytes is shorter than its header");
        }
        int frameMagic = readIntLE(src, off);
        if ((frameMagic & 0xFFFFFFF0) == LZ4_SKIPPABLE_MAGIC) {
            return new Section(new byte[0], 0);
        }
        if (frameMagic != LZ4_MAGIC) {
            throw corrupt(LZ4, String.format("no lz4 frame (magic 0x%08x)", frameMagic));
        }
        int flg = src[off + 4] & 0xFF;
        int bd = src[off + 5] & 0xFF;
        if (flg >>> 6 != 1) {
            throw corrupt(LZ4, "frame version " + (flg >>> 6) + ", not 1");
        }
        if ((flg & FLG_RESERVED) != 0 || (bd & 0x8F) != 0) {
            throw corrupt(LZ4, "reserved bits set in the frame descriptor");
        }
        int blockSizeId = bd >>> 4 & 7;
        if (blockSizeId < 4) {
            throw corrupt(LZ4, "block size id " + blockSizeId);
        }
        int blockMax = 1 << (8 + 2 * blockSizeId);
        int headerEnd = off + 7 + ((flg & FLG_CONTENT_SIZE) != 0 ? 8 : 0) + ((flg & FLG_DICT_ID) != 0 ? 4 : 0);
        if (headerEnd > end) {
            throw new CorruptRecordException(Kind.BAD_COMPRESSED_DATA, "lz4 frame is truncated");
        }
        // Kafka 0.8 hashed the magic number too into a v0 message's header checksum (KAFKA-3160).
        if (magic != 0) {
            int expected = XXHASH.hash(src, off + 4, headerEnd - 1 - (off + 4), 0) >>> 8 & 0xFF;
            if ((src[headerEnd - 1] & 0xFF) != expected) {
                throw corrupt(LZ4, "the frame header checksum is wrong");
            }
        }
        long contentSize = -1;
        if ((flg & FLG_CONTENT_SIZE) != 0) {
            contentSize = readLongLE(src, off + 6);
            if (contentSize < 0 || contentSize > maxSize) {
                throw tooLarge(LZ4, maxSize);
            }
        }
        boolean blockChecksums = (flg & FLG_BLOCK_CHECKSUM) != 0;
        boolean independent = (flg & FLG_BLOCK_INDEPENDENT) != 0;
        // Size the output from the blocks' headers: a compressed block holds at most blockMax
        // bytes and at most 255 per compressed byte (LZ4's largest ratio).
        long bound = 0;
        int p = headerEnd;
        while (true) {
            if (end - p < 4) {
                throw new CorruptRecordException(Kind.BAD_COMPRESSED_DATA, "lz4 frame is truncated");
            }
            int word = readIntLE(src, p);
            if (word == 0) {
                break;
            }
            int n = word & ~STORED_BLOCK;
            if (n > blockMax) {
                throw corrupt(LZ4, "a block of " + n + " bytes, more than the frame's " + blockMax);
            }
            p += 4;
            if (end - p < n + (blockChecksums ? 4 : 0)) {
                throw new CorruptRecordException(Kind.BAD_COMPRESSED_DATA, "lz4 frame is truncated");
            }
            bound += (word & STORED_BLOCK) != 0 ? n : Math.min(blockMax, (long) LZ4_MAX_RATIO * n + 16);
            p += n + (blockChecksums ? 4 : 0);
        }
        if ((flg & FLG_CONTENT_CHECKSUM) != 0 && end - p - 4 < 4) {
            throw new CorruptRecordException(Kind.BAD_COMPRESSED_DATA, "lz4 frame is truncated");
        }
        // The bound holds every block of a well-formed frame: output that does not fit is more
        // than the frame declares, or more than maxSize.
        boolean declared = contentSize >= 0;
        if (declared && contentSize > bound) {
            throw corrupt(LZ4, "the frame declares " + contentSize + " bytes but its blocks hold at most " + bound);
        }
        byte[] out = new byte[(int) (declared ? contentSize : Math.min(bound, maxSize))];
        int total = 0;
        p = headerEnd;
        while (true) {
            int word = readIntLE(src, p);
            p += 4;
            if (word == 0) {
                break;
            }
            int n = word & ~STORED_BLOCK;
            if (blockChecksums && XXHASH.hash(src, p, n, 0) != readIntLE(src, p + n)) {
                throw corrupt(LZ4, "a block checksum is wrong");
            }
            if ((word & STORED_BLOCK) != 0) {
                if (n > out.length - total) {
                    throw declared ? corrupt(LZ4, "the frame holds more than the " + contentSize + " bytes it declares")
                                   : tooLarge(LZ4, maxSize);
                }
                System.arraycopy(src, p, out, total, n);
                total += n;
            } else {
                int room = Math.min(blockMax, out.length - total);
                int written = independent ? independentBlock(src, p, n, out, total, room)
                                          : (int) linkedBlock(src, p, n, out, total, room);
                if (written < 0) {
                    if (room < blockMax && blockFits(src, p, n, blockMax, independent)) {
                        throw declared ? corrupt(LZ4, "the frame holds more than the " + contentSize
                                                      + " bytes it declares")
                                       : tooLarge(LZ4, maxSize);
                    }
                    throw corrupt(LZ4, "a block is malformed or holds more than " + blockMax + " bytes");
                }
                total += written;
            }
            p += n + (blockChecksums ? 4 : 0);
        }
        if ((flg & FLG_CONTENT_CHECKSUM) != 0 && XXHASH.hash(out, 0, total, 0) != readIntLE(src, p)) {
            throw corrupt(LZ4, "the content checksum is wrong");
        }
        if (contentSize >= 0 && total != contentSize) {
            throw corrupt(LZ4, "the frame declares " + contentSize + " bytes but holds " + total);
        }
        return new Section(out, total);
    }

    /** A block decompressed into out[o, o + room): its size, or -1 when malformed or larger than room. */
    private static int independentBlock(byte[] src, int p, int n, byte[] out, int o, int room) {
        try {
            return LZ4_BLOCKS.decompress(src, p, n, out, o, room);
        } catch (LZ4Exception e) {
            return -1;
        }
    }

    /** Whether a block that did not fit the room left fits a block's size: then the output is too large, the block good. */
    private static boolean blockFits(byte[] src, int p, int n, int blockMax, boolean independent) {
        byte[] scratch = new byte[blockMax];
        // A linked block's matches may reach into earlier blocks, absent from scratch: counting its
        // output length needs no match bytes, so count it instead of decompressing it.
        return independent ? independentBlock(src, p, n, scratch, 0, blockMax) >= 0
                           : linkedBlock(src, p, n, null, 0, Long.MAX_VALUE) >= 0;
    }

    /**
     * A block of a linked frame (its matches may reach back into the blocks before it, which lie
     * in out before o) decompressed into out[o, o + room): its size, or -1 when malformed or
     * larger than room. With {@code out} null, only counted: its structure checked and its size
     * returned, no byte copied (the earlier blocks its matches reach into are not needed then).
     */
    private static long linkedBlock(byte[] src, int p, int n, byte[] out, int o, long room) {
        int s = p;
        int sEnd = p + n;
        long d = o;
        long dEnd = o + room;
        while (s < sEnd) {
            int token = src[s++] & 0xFF;
            int literals = token >>> 4;
            if (literals == 15) {
                int b;
                do {
                    if (s >= sEnd) {
                        return -1;
                    }
                    b = src[s++] & 0xFF;
                    literals += b;
                } while (b == 255 && literals < Integer.MAX_VALUE - 255);
            }
            if (literals > sEnd - s || literals > dEnd - d) {
                return -1;
            }
            if (out != null) {
                System.arraycopy(src, s, out, (int) d, literals);
            }
            s += literals;
            d += literals;
            if (s == sEnd) {
                break;  // the last sequence has literals only
            }
            if (sEnd - s < 2) {
                return -1;
            }
            int distance = (src[s] & 0xFF) | (src[s + 1] & 0xFF) << 8;
            s += 2;
            if (out != null && (distance == 0 || distance > d)) {
                return -1;
            }
            int match = (token & 15) + 4;
            if ((token & 15) == 15) {
                int b;
                do {
                    if (s >= sEnd) {
                        return -1;
                    }
                    b = src[s++] & 0xFF;
                    match += b;
                } while (b == 255 && match < Integer.MAX_VALUE - 255);
            }
            if (match > dEnd - d) {
                return -1;
            }
            if (out != null) {
                int from = (int) d - distance;
                if (distance >= match) {
                    System.arraycopy(out, from, out, (int) d, match);
                } else {
                    for (int i = 0; i < match; i++) {
                        out[(int) d + i] = out[from + i];
                    }
                }
            }
            d += match;
        }
        return d - o;
    }

    // -- zstd ---------------------------------------------------------------------------------

    private static Section zstd(byte[] src, int off, int len, int maxSize) {
        int end = off + len;
        if (len == 0) {
            return new Section(new byte[0], 0);
        }
        // Walk the frames: truncation and stray bytes are found here, and when every frame
        // declares its size the output is allocated once and decompressed in one call.
        long declared = 0;
        boolean known = true;
        for (int p = off; p < end; ) {
            long frame;
            long size;
            try {
                frame = Zstd.findFrameCompressedSize(src, p, end - p);
                size = Zstd.getFrameContentSize(src, p, (int) frame);
            } catch (ZstdException e) {
                throw corrupt(ZSTD, "at byte " + (p - off) + ": " + e.getMessage());
            }
            if (size == -1) {
                known = false;
            } else if (size < 0) {
                throw corrupt(ZSTD, "at byte " + (p - off) + ": the frame header is malformed");
            } else {
                declared += size;
                if (declared > maxSize) {
                    throw tooLarge(ZSTD, maxSize);
                }
            }
            p += (int) frame;
        }
        if (known && (declared <= ZSTD_TRUSTED_SIZE || declared <= (long) ZSTD_TRUSTED_RATIO * len)) {
            byte[] out = new byte[(int) declared];
            try (ZstdDecompressCtx context = new ZstdDecompressCtx()) {
                int n = context.decompressByteArray(out, 0, out.length, src, off, len);
                if (n != out.length) {
                    throw corrupt(ZSTD, "the frames declare " + declared + " bytes but hold " + n);
                }
            } catch (ZstdException e) {
                throw corrupt(ZSTD, String.valueOf(e.getMessage()));
            }
            return new Section(out, out.length);
        }
        long initial = known ? Math.min(declared, ZSTD_TRUSTED_SIZE) : Math.max(8L * len, MIN_CAPACITY);
        byte[] out = new byte[(int) Math.min(initial, maxSize + 1L)];
        int total = 0;
        try (ZstdInputStreamNoFinalizer in = new ZstdInputStreamNoFinalizer(new ByteArrayInputStream(src, off, len))) {
            while (true) {
                if (total == out.length) {
                    // Full: one more byte says whether the output goes on, without growing.
                    int b = in.read();
                    if (b < 0) {
                        break;
                    }
                    if (total >= maxSize) {
                        throw tooLarge(ZSTD, maxSize);
                    }
                    int capacity = grow(out.length, 1, maxSize);
                    if (known && declared > out.length) {
                        capacity = (int) Math.min(capacity, declared);
                    }
                    out = Arrays.copyOf(out, capacity);
                    out[total++] = (byte) b;
                    continue;
                }
                int n = in.read(out, total, out.length - total);
                if (n < 0) {
                    break;
                }
                total += n;
                if (total > maxSize) {
                    throw tooLarge(ZSTD, maxSize);
                }
            }
        } catch (IOException | ZstdException e) {
            throw corrupt(ZSTD, String.valueOf(e.getMessage()));
        }
        return new Section(out, total);
    }

    private static int readIntLE(byte[] b, int p) {
        return (b[p] & 0xFF) | (b[p + 1] & 0xFF) << 8 | (b[p + 2] & 0xFF) << 16 | (b[p + 3] & 0xFF) << 24;
    }

    private static long readLongLE(byte[] b, int p) {
        return (readIntLE(b, p) & 0xFFFFFFFFL) | (long) readIntLE(b, p + 4) << 32;
    }
}
