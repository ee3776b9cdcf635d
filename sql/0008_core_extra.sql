-- reserved for its capability; replaced when it lands
SELECT 1;
