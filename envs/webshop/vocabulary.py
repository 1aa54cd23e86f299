"""The word lists the catalog generator draws from: shop categories, product types, brands, phrases.

Each :class:`ProductType` is one kind of product as WebShop's scraped data has it: the search query it
was found with, its Amazon-style category path, the attribute phrases its instructions ask for
(``"long lasting"``, ``"machine wash"``), its customization options (``color``, ``size``, ...) and a
typical price range. The five top-level categories are WebShop's own.

Example:
    >>> sorted(CATEGORIES)
    ['beauty', 'electronics', 'fashion', 'food', 'furniture']
    >>> all(len(kind.attributes) >= 6 for kinds in CATEGORIES.values() for kind in kinds)
    True
"""

from __future__ import annotations

from typing import NamedTuple


class ProductType(NamedTuple):
    """One kind of product.

    Attributes:
        noun: The product's name in titles and instructions (``"hair extension"``).
        query: The search query the product was found with (WebShop's ``query`` field).
        path: The category path, coarse to fine (WebShop's ``product_category``, joined by ``›``).
        attributes: Phrases instructions ask for; each product has several of them.
        options: Option group name to the values a product of this kind may offer.
        price: Typical (low, high) price in dollars.
        uses: Short phrases for what the product is for, used in descriptions and reviews.
    """

    noun: str
    query: str
    path: tuple[str, ...]
    attributes: tuple[str, ...]
    options: dict[str, tuple[str, ...]]
    price: tuple[float, float]
    uses: tuple[str, ...]


_COLORS = (
    "Black", "White", "Navy Blue", "Light Grey", "Dark Brown", "Red", "Pink", "Beige", "Olive Green",
    "Burgundy", "Charcoal", "Ivory", "Teal", "Mustard Yellow", "Lavender", "Black/White", "Blue/Grey",
)
_CLOTHING_SIZES = ("X-Small", "Small", "Medium", "Large", "X-Large", "XX-Large", "3X-Large")
_SHOE_SIZES = ("6", "6.5", "7", "7.5", "8", "8.5", "9", "9.5", "10", "10.5", "11", "12")

CATEGORIES: dict[str, tuple[ProductType, ...]] = {
    "beauty": (
        ProductType(
            "hair extension", "hair extensions",
            ("Beauty & Personal Care", "Hair Care", "Hair Extensions, Wigs & Accessories", "Hair Extensions"),
            ("natural looking", "heat resistant", "easy apply", "long lasting", "high quality", "synthetic hair",
             "clip in", "tangle free"),
            {"color": ("Natural Black", "Dark Brown", "Ash Blonde", "Auburn", "Platinum Blonde", "Ombre Brown"),
             "size": ("14 Inch", "16 Inch", "18 Inch", "20 Inch", "22 Inch", "24 Inch")},
            (12.0, 60.0), ("everyday styling", "adding volume", "special occasions"),
        ),
        ProductType(
            "lipstick", "lipstick",
            ("Beauty & Personal Care", "Makeup", "Lips", "Lipstick"),
            ("long lasting", "cruelty free", "paraben free", "highly pigmented", "moisturizing", "matte finish",
             "vegan", "waterproof"),
            {"color": ("Ruby Red", "Nude Pink", "Berry", "Coral", "Mauve", "Plum", "Classic Red"),
             "size": ("0.12 Ounce", "0.14 Ounce (Pack of 2)", "0.12 Ounce (Pack of 3)")},
            (5.0, 32.0), ("daily wear", "evening looks", "a bold lip"),
        ),
        ProductType(
            "face moisturizer", "face moisturizer",
            ("Beauty & Personal Care", "Skin Care", "Face", "Creams & Moisturizers", "Face Moisturizers"),
            ("oil free", "fragrance free", "dry skin", "sensitive skin", "hyaluronic acid", "non greasy",
             "anti aging", "dermatologist tested"),
            {"size": ("1.7 Fl Oz", "2.5 Fl Oz", "3.4 Fl Oz", "1.7 Fl Oz (Pack of 2)"),
             "scent": ("Unscented", "Cucumber", "Green Tea", "Lavender")},
            (9.0, 55.0), ("morning routines", "night care", "all day hydration"),
        ),
        ProductType(
            "shampoo", "sulfate free shampoo",
            ("Beauty & Personal Care", "Hair Care", "Shampoo & Conditioner", "Shampoos"),
            ("sulfate free", "paraben free", "color safe", "dry hair", "natural ingredients", "damaged hair",
             "tea tree", "argan oil"),
            {"size": ("8 Fl Oz", "12 Fl Oz", "16.9 Fl Oz", "33.8 Fl Oz"),
             "scent": ("Coconut", "Tea Tree", "Lavender", "Citrus", "Unscented")},
            (6.0, 35.0), ("daily washing", "repairing damaged hair", "color treated hair"),
        ),
        ProductType(
            "nail polish", "nail polish",
            ("Beauty & Personal Care", "Foot, Hand & Nail Care", "Nail Art & Polish", "Nail Polish"),
            ("quick dry", "long lasting", "non toxic", "high gloss", "chip resistant", "cruelty free",
             "easy apply", "vegan"),
            {"color": ("Cherry Red", "Nude", "Lilac", "Midnight Navy", "Mint", "Gold Glitter", "Black"),
             "size": ("0.5 Fl Oz", "0.5 Fl Oz (Pack of 3)", "0.5 Fl Oz (Pack of 6)")},
            (4.0, 24.0), ("home manicures", "salon results", "quick touch ups"),
        ),
        ProductType(
            "makeup brush set", "makeup brushes",
            ("Beauty & Personal Care", "Tools & Accessories", "Makeup Brushes & Tools", "Brush Sets"),
            ("synthetic bristles", "easy clean", "travel size", "high quality", "cruelty free", "soft bristles",
             "wooden handle", "storage case"),
            {"color": ("Rose Gold", "Black", "Pink", "White/Gold", "Marble"),
             "size": ("5 Piece", "12 Piece", "16 Piece", "20 Piece")},
            (8.0, 45.0), ("foundation", "eye makeup", "contouring"),
        ),
        ProductType(
            "perfume", "perfume for women",
            ("Beauty & Personal Care", "Fragrance", "Women's", "Eau de Parfum"),
            ("long lasting", "floral scent", "travel size", "gift set", "alcohol free", "fresh scent",
             "woody notes", "vanilla notes"),
            {"size": ("1 Fl Oz", "1.7 Fl Oz", "3.4 Fl Oz", "0.33 Fl Oz Rollerball"),
             "scent": ("Jasmine", "Rose", "Vanilla Amber", "Citrus Blossom", "Sandalwood")},
            (18.0, 120.0), ("daily wear", "evenings out", "gifting"),
        ),
        ProductType(
            "deodorant", "natural deodorant",
            ("Beauty & Personal Care", "Personal Care", "Deodorants & Antiperspirants", "Deodorants"),
            ("aluminum free", "sensitive skin", "long lasting", "natural ingredients", "baking soda free",
             "paraben free", "cruelty free", "travel size"),
            {"scent": ("Bright Citrus", "Calming Lavender", "Ginger Fresh", "Unscented", "Cedarwood"),
             "size": ("2.65 Ounce", "3 Ounce (Pack of 2)", "Travel Set (4-Pack)")},
            (6.0, 28.0), ("all day freshness", "sensitive underarms", "the gym"),
        ),
    ),
    "electronics": (
        ProductType(
            "wireless earbuds", "bluetooth earbuds",
            ("Electronics", "Headphones, Earbuds & Accessories", "Headphones & Earbuds", "Earbud Headphones"),
            ("noise cancelling", "long battery life", "water resistant", "fast charging", "bluetooth 5.3",
             "built in microphone", "touch control", "charging case"),
            {"color": ("Black", "White", "Navy Blue", "Rose Gold", "Midnight Green")},
            (19.0, 180.0), ("workouts", "commuting", "phone calls"),
        ),
        ProductType(
            "phone case", "iphone case",
            ("Cell Phones & Accessories", "Cases, Holsters & Sleeves", "Basic Cases"),
            ("shockproof", "slim fit", "wireless charging compatible", "drop protection", "raised edges",
             "anti yellowing", "scratch resistant", "easy install"),
            {"color": ("Clear", "Black", "Midnight Blue", "Lavender", "Forest Green", "Red"),
             "size": ("iPhone 13", "iPhone 14", "iPhone 14 Pro", "iPhone 15", "iPhone 15 Pro Max")},
            (7.0, 40.0), ("everyday protection", "drops", "a slim pocket fit"),
        ),
        ProductType(
            "usb c charger", "usb c charger",
            ("Electronics", "Computers & Accessories", "Laptop Accessories", "Chargers & Adapters"),
            ("fast charging", "compact design", "foldable plug", "overheat protection", "dual port",
             "high speed", "travel size", "gan technology"),
            {"size": ("20W", "30W", "45W", "65W", "100W"), "color": ("White", "Black")},
            (10.0, 70.0), ("phones", "laptops", "travel"),
        ),
        ProductType(
            "smart watch", "smart watch",
            ("Electronics", "Wearable Technology", "Smartwatches"),
            ("heart rate monitor", "water resistant", "long battery life", "sleep tracking", "gps",
             "touch screen", "fitness tracker", "bluetooth calling"),
            {"color": ("Black", "Silver", "Rose Gold", "Olive Green", "Navy Blue"),
             "size": ("40mm", "42mm", "44mm", "46mm")},
            (29.0, 260.0), ("fitness tracking", "notifications", "sleep monitoring"),
        ),
        ProductType(
            "bluetooth speaker", "portable bluetooth speaker",
            ("Electronics", "Portable Audio & Video", "Portable Speakers & Docks", "Portable Bluetooth Speakers"),
            ("waterproof", "long battery life", "deep bass", "portable design", "stereo pairing",
             "built in microphone", "dustproof", "loud sound"),
            {"color": ("Black", "Blue", "Red", "Camo Green", "Grey")},
            (18.0, 150.0), ("outdoor parties", "the beach", "the shower"),
        ),
        ProductType(
            "hdmi cable", "hdmi cable",
            ("Electronics", "Accessories & Supplies", "Audio & Video Accessories", "Cables", "HDMI Cables"),
            ("high speed", "4k hdr", "braided nylon", "gold plated", "ethernet support", "8k ready",
             "durable design", "easy install"),
            {"size": ("3 Feet", "6 Feet", "10 Feet", "15 Feet", "25 Feet"), "color": ("Black", "Grey", "White")},
            (6.0, 30.0), ("gaming consoles", "home theaters", "monitors"),
        ),
        ProductType(
            "wireless mouse", "wireless mouse",
            ("Electronics", "Computers & Accessories", "Computer Accessories & Peripherals", "Keyboards, Mice & Accessories", "Mice"),
            ("ergonomic design", "silent click", "long battery life", "usb receiver", "adjustable dpi",
             "plug and play", "bluetooth 5.0", "rechargeable battery"),
            {"color": ("Black", "White", "Grey", "Pink", "Blue")},
            (9.0, 60.0), ("office work", "laptops", "gaming"),
        ),
        ProductType(
            "tv mount", "tv wall mount",
            ("Electronics", "Television & Video", "Accessories", "TV Mounts, Stands & Turntables", "TV Wall & Ceiling Mounts"),
            ("full motion", "heavy duty", "easy install", "tilt swivel", "low profile", "cable management",
             "vesa compatible", "space saving"),
            {"size": ("26-55 Inch", "32-65 Inch", "37-75 Inch", "42-90 Inch")},
            (18.0, 110.0), ("living rooms", "bedrooms", "offices"),
        ),
    ),
    "fashion": (
        ProductType(
            "t-shirt", "men's t shirt",
            ("Clothing, Shoes & Jewelry", "Men", "Clothing", "Shirts", "T-Shirts"),
            ("machine wash", "cotton spandex", "short sleeve", "relaxed fit", "moisture wicking", "classic fit",
             "crew neck", "quick dry"),
            {"color": _COLORS[:12], "size": _CLOTHING_SIZES},
            (8.0, 35.0), ("everyday wear", "layering", "workouts"),
        ),
        ProductType(
            "running shoe", "women's running shoes",
            ("Clothing, Shoes & Jewelry", "Women", "Shoes", "Athletic", "Running"),
            ("non slip", "rubber sole", "lightweight", "breathable mesh", "arch support", "memory foam",
             "lace up", "shock absorption"),
            {"color": ("Black/White", "Grey/Pink", "Navy", "All White", "Teal/Coral", "Lavender"),
             "size": _SHOE_SIZES},
            (25.0, 140.0), ("running", "walking", "gym training"),
        ),
        ProductType(
            "yoga pant", "women's yoga pants",
            ("Clothing, Shoes & Jewelry", "Women", "Clothing", "Active", "Active Pants"),
            ("high waist", "tummy control", "four way stretch", "moisture wicking", "squat proof",
             "machine wash", "side pockets", "elastic waistband"),
            {"color": ("Black", "Navy Blue", "Charcoal", "Olive Green", "Burgundy", "Dusty Pink"),
             "size": _CLOTHING_SIZES[:6]},
            (15.0, 60.0), ("yoga", "running", "lounging"),
        ),
        ProductType(
            "winter jacket", "men's winter jacket",
            ("Clothing, Shoes & Jewelry", "Men", "Clothing", "Jackets & Coats", "Down & Down Alternative"),
            ("water resistant", "detachable hood", "warm fleece lining", "zipper closure", "windproof",
             "machine wash", "multiple pockets", "insulated"),
            {"color": ("Black", "Navy Blue", "Army Green", "Khaki", "Dark Grey", "Red"),
             "size": _CLOTHING_SIZES},
            (35.0, 190.0), ("cold weather", "hiking", "daily commutes"),
        ),
        ProductType(
            "dress", "women's summer dress",
            ("Clothing, Shoes & Jewelry", "Women", "Clothing", "Dresses", "Casual"),
            ("v neck", "short sleeve", "flowy", "button down", "floral print", "machine wash", "with pockets",
             "elastic waist"),
            {"color": ("Floral Blue", "Black", "Green Dot", "Beige", "Red Floral", "White/Navy"),
             "size": _CLOTHING_SIZES[:6]},
            (18.0, 70.0), ("summer days", "beach trips", "casual outings"),
        ),
        ProductType(
            "backpack", "laptop backpack",
            ("Clothing, Shoes & Jewelry", "Luggage & Travel Gear", "Backpacks", "Laptop Backpacks"),
            ("water resistant", "usb charging port", "anti theft", "padded laptop compartment", "large capacity",
             "lightweight", "adjustable straps", "durable fabric"),
            {"color": ("Black", "Grey", "Navy Blue", "Olive", "Burgundy"),
             "size": ("15.6 Inch", "17 Inch")},
            (20.0, 90.0), ("travel", "college", "work"),
        ),
        ProductType(
            "sock", "men's athletic socks",
            ("Clothing, Shoes & Jewelry", "Men", "Clothing", "Socks", "Athletic Socks"),
            ("cushioned sole", "moisture wicking", "arch support", "breathable", "machine wash", "reinforced heel",
             "odor resistant", "no show"),
            {"color": ("White", "Black", "Grey", "Multicolor"),
             "size": ("Shoe Size 6-9", "Shoe Size 9-12", "Shoe Size 12-15")},
            (8.0, 30.0), ("sports", "everyday wear", "hiking"),
        ),
        ProductType(
            "sunglasses", "polarized sunglasses",
            ("Clothing, Shoes & Jewelry", "Men", "Accessories", "Sunglasses & Eyewear Accessories", "Sunglasses"),
            ("polarized lenses", "uv protection", "lightweight frame", "scratch resistant", "metal frame",
             "case included", "anti glare", "spring hinges"),
            {"color": ("Black/Grey", "Tortoise/Brown", "Gold/Green", "Silver/Blue Mirror", "Matte Black")},
            (10.0, 160.0), ("driving", "fishing", "beach days"),
        ),
    ),
    "food": (
        ProductType(
            "coffee bean", "whole bean coffee",
            ("Grocery & Gourmet Food", "Beverages", "Coffee, Tea & Cocoa", "Coffee", "Whole Coffee Beans"),
            ("medium roast", "single origin", "fair trade", "usda organic", "low acid", "dark roast",
             "freshly roasted", "rich flavor"),
            {"flavor name": ("Colombian", "Breakfast Blend", "French Roast", "Ethiopian", "Hazelnut"),
             "size": ("12 Ounce", "2 Pound", "5 Pound", "12 Ounce (Pack of 2)")},
            (9.0, 55.0), ("espresso", "drip brewing", "cold brew"),
        ),
        ProductType(
            "protein bar", "protein bars",
            ("Grocery & Gourmet Food", "Snack Foods", "Bars", "Protein Bars"),
            ("gluten free", "low sugar", "high protein", "keto friendly", "non gmo", "plant based",
             "individually wrapped", "no artificial flavors"),
            {"flavor name": ("Chocolate Peanut Butter", "Cookies & Cream", "Salted Caramel", "Birthday Cake",
                             "Mint Chocolate"),
             "size": ("12 Count", "15 Count", "24 Count")},
            (12.0, 45.0), ("post workout snacks", "busy mornings", "hiking"),
        ),
        ProductType(
            "green tea", "green tea bags",
            ("Grocery & Gourmet Food", "Beverages", "Coffee, Tea & Cocoa", "Tea", "Green"),
            ("usda organic", "caffeine free", "non gmo", "individually wrapped", "antioxidant rich",
             "natural ingredients", "kosher", "gluten free"),
            {"flavor name": ("Original", "Jasmine", "Mint", "Lemon Ginger", "Matcha"),
             "size": ("20 Count (Pack of 1)", "20 Count (Pack of 6)", "100 Count")},
            (5.0, 30.0), ("relaxing evenings", "morning energy", "iced tea"),
        ),
        ProductType(
            "snack nut mix", "mixed nuts",
            ("Grocery & Gourmet Food", "Snack Foods", "Nuts & Seeds", "Mixed Nuts"),
            ("low sodium", "roasted", "non gmo", "resealable bag", "high protein", "gluten free", "keto friendly",
             "no added sugar"),
            {"flavor name": ("Lightly Salted", "Unsalted", "Honey Roasted", "Sea Salt & Pepper"),
             "size": ("1 Pound", "2.5 Pound", "1.5 Ounce (Pack of 24)")},
            (8.0, 40.0), ("snacking", "trail mix", "parties"),
        ),
        ProductType(
            "olive oil", "extra virgin olive oil",
            ("Grocery & Gourmet Food", "Pantry Staples", "Cooking & Baking", "Oils, Vinegars & Salad Dressings",
             "Oils", "Olive"),
            ("extra virgin", "cold pressed", "usda organic", "non gmo", "first cold press", "kosher",
             "rich flavor", "glass bottle"),
            {"size": ("16.9 Fl Oz", "25.3 Fl Oz", "33.8 Fl Oz", "101 Fl Oz")},
            (8.0, 45.0), ("salad dressings", "cooking", "dipping bread"),
        ),
        ProductType(
            "dark chocolate", "dark chocolate bar",
            ("Grocery & Gourmet Food", "Candy & Chocolate", "Chocolate", "Chocolate Bars"),
            ("fair trade", "dairy free", "gluten free", "low sugar", "usda organic", "vegan", "non gmo",
             "individually wrapped"),
            {"flavor name": ("72% Cacao", "Sea Salt Almond", "Raspberry", "Mint", "85% Cacao"),
             "size": ("3 Ounce (Pack of 4)", "3 Ounce (Pack of 12)", "1.4 Ounce (Pack of 10)")},
            (6.0, 40.0), ("dessert", "gifts", "baking"),
        ),
        ProductType(
            "pasta", "whole wheat pasta",
            ("Grocery & Gourmet Food", "Pantry Staples", "Pasta & Noodles", "Dry Pasta"),
            ("whole grain", "non gmo", "high fiber", "usda organic", "gluten free", "kosher", "high protein",
             "low fat"),
            {"style": ("Spaghetti", "Penne", "Fusilli", "Rotini", "Elbows"),
             "size": ("16 Ounce (Pack of 4)", "16 Ounce (Pack of 8)", "12 Ounce (Pack of 12)")},
            (6.0, 32.0), ("weeknight dinners", "pasta salads", "meal prep"),
        ),
        ProductType(
            "beef jerky", "beef jerky",
            ("Grocery & Gourmet Food", "Meat & Seafood", "Jerky & Dried Meats", "Beef Jerky"),
            ("high protein", "low fat", "gluten free", "grass fed", "no preservatives", "resealable bag",
             "keto friendly", "low sugar"),
            {"flavor name": ("Original", "Teriyaki", "Peppered", "Sweet & Spicy", "Hickory Smoked"),
             "size": ("3.25 Ounce", "10 Ounce", "1 Ounce (Pack of 8)")},
            (8.0, 40.0), ("road trips", "camping", "post workout snacks"),
        ),
    ),
    "furniture": (
        ProductType(
            "office chair", "ergonomic office chair",
            ("Home & Kitchen", "Furniture", "Home Office Furniture", "Home Office Chairs", "Desk Chairs"),
            ("lumbar support", "adjustable height", "breathable mesh", "easy assemble", "swivel wheels",
             "padded armrests", "high back", "heavy duty"),
            {"color": ("Black", "Grey", "White", "Blue", "Pink")},
            (60.0, 320.0), ("home offices", "gaming", "long work days"),
        ),
        ProductType(
            "bookshelf", "bookshelf",
            ("Home & Kitchen", "Furniture", "Living Room Furniture", "Bookcases"),
            ("easy assemble", "space saving", "solid wood", "industrial style", "sturdy frame", "open shelves",
             "anti tip hardware", "rustic finish"),
            {"color": ("Rustic Brown", "Black", "White", "Walnut", "Grey Wash"),
             "size": ("3-Tier", "4-Tier", "5-Tier")},
            (35.0, 220.0), ("living rooms", "home offices", "kids rooms"),
        ),
        ProductType(
            "bar stool", "bar stools set of 2",
            ("Home & Kitchen", "Furniture", "Kitchen & Dining Room Furniture", "Bar Stools"),
            ("adjustable height", "swivel seat", "easy assemble", "padded seat", "footrest", "metal frame",
             "faux leather", "backrest"),
            {"color": ("Black", "Brown", "Grey", "White", "Green"),
             "size": ("24 Inch Counter Height", "30 Inch Bar Height", "Set of 2", "Set of 4")},
            (45.0, 260.0), ("kitchen islands", "home bars", "breakfast nooks"),
        ),
        ProductType(
            "coffee table", "coffee table",
            ("Home & Kitchen", "Furniture", "Living Room Furniture", "Tables", "Coffee Tables"),
            ("storage shelf", "easy assemble", "mid century modern", "solid wood", "lift top", "metal legs",
             "scratch resistant", "round design"),
            {"color": ("Walnut", "Black", "White", "Oak", "Grey")},
            (50.0, 300.0), ("living rooms", "small apartments", "entertaining"),
        ),
        ProductType(
            "bed frame", "queen bed frame",
            ("Home & Kitchen", "Furniture", "Bedroom Furniture", "Beds, Frames & Bases", "Bed Frames"),
            ("noise free", "easy assemble", "under bed storage", "heavy duty", "no box spring needed",
             "upholstered headboard", "metal slats", "solid wood"),
            {"color": ("Black", "Grey", "White", "Dark Walnut", "Beige"),
             "size": ("Twin", "Full", "Queen", "King")},
            (90.0, 480.0), ("bedrooms", "guest rooms", "small spaces"),
        ),
        ProductType(
            "shoe rack", "shoe rack",
            ("Home & Kitchen", "Storage & Organization", "Clothing & Closet Storage", "Shoe Organizers"),
            ("space saving", "easy assemble", "stackable", "metal frame", "free standing", "durable design",
             "adjustable shelves", "bamboo wood"),
            {"color": ("Black", "White", "Natural Bamboo", "Grey"),
             "size": ("3-Tier", "4-Tier", "6-Tier", "10-Tier")},
            (15.0, 80.0), ("entryways", "closets", "dorm rooms"),
        ),
        ProductType(
            "area rug", "area rug living room",
            ("Home & Kitchen", "Home Décor Products", "Area Rugs, Runners & Pads", "Area Rugs"),
            ("non slip", "machine washable", "low pile", "stain resistant", "soft touch", "pet friendly",
             "non shedding", "easy clean"),
            {"color": ("Grey/Ivory", "Blue", "Beige", "Multicolor", "Navy/Cream"),
             "size": ("2' x 3'", "4' x 6'", "5' x 7'", "8' x 10'")},
            (25.0, 260.0), ("living rooms", "bedrooms", "nurseries"),
        ),
        ProductType(
            "desk lamp", "led desk lamp",
            ("Tools & Home Improvement", "Lighting & Ceiling Fans", "Lamps & Shades", "Desk Lamps"),
            ("dimmable", "usb charging port", "eye caring", "touch control", "adjustable arm", "energy efficient",
             "memory function", "flicker free"),
            {"color": ("Black", "White", "Silver", "Rose Gold")},
            (14.0, 70.0), ("reading", "studying", "home offices"),
        ),
    ),
}

BRANDS: tuple[str, ...] = (
    "Lumora", "Kestrel", "Oakhaven", "Brightwell", "Norvik", "Solenne", "Tidewater", "Verano", "Hallmere",
    "Quillon", "Cobaltia", "Ardentia", "Fernwood", "Halcyra", "Marisol", "Pinecrest", "Roamly", "Sablewood",
    "Tessaro", "Umberlane", "Valdor", "Wrenfield", "Yarrowe", "Zephyra", "Aldermoor", "Belcastro", "Corvina",
    "Dunmore", "Elderglen", "Foxley", "Glenrock", "Harbrook", "Ironvale", "Juniper & Co", "Kinsley",
    "Larkspur", "Meadowvale", "Northstead", "Orchard Lane", "Palisade", "Redfern", "Silverbirch", "Thornbury",
    "Upland", "Vesper", "Westbrook", "Amberly", "Bramblewick", "Clearwater", "Driftwood",
)

#: Sentences of product descriptions: ``{brand}``, ``{noun}``, ``{a}``, ``{b}`` and ``{use}`` are filled in.
DESCRIPTIONS: tuple[str, ...] = (
    "The {brand} {noun} is {a} and {b}, made for {use}.",
    "Designed for {use}, this {noun} from {brand} is {a} and built to last.",
    "Meet the {noun} that is {a} without compromise: {brand} made it {b} as well, ideal for {use}.",
    "{brand} has spent years refining this {noun}; it is {a}, {b} and ready for {use}.",
    "Whether you need it for {use} or every day, this {a} {noun} delivers.",
    "Every {brand} {noun} is checked by hand before it ships.",
    "A thoughtful gift and a reliable choice for {use}.",
    "Our customers choose it because it is {b}.",
)

#: Feature bullet templates: ``{A}`` is the attribute in upper case, ``{a}`` as is.
BULLETS: tuple[str, ...] = (
    "{A}: our {noun} is {a}, so you can rely on it for {use}.",
    "{A} - tested to stay {a} through daily use.",
    "WHY {A}: customers asked for a {noun} that is {a}; we listened.",
    "{A} design that suits {use}.",
    "SATISFACTION GUARANTEED: if your {noun} is not {a}, we will replace it.",
)

REVIEW_TITLES: dict[int, tuple[str, ...]] = {
    1: ("Disappointed", "Broke after a week", "Not as described"),
    2: ("Not great", "Expected more", "Just okay for the price"),
    3: ("It's fine", "Does the job", "Average quality"),
    4: ("Very good", "Happy with it", "Solid purchase"),
    5: ("Love it!", "Exactly what I needed", "Five stars", "Highly recommend"),
}

REVIEW_BODIES: dict[int, tuple[str, ...]] = {
    1: ("I bought this {noun} for {use} and it did not hold up.", "The {noun} arrived damaged and support was slow."),
    2: ("The {noun} works but it is not really {a}.", "Okay for {use}, but I would not buy it again."),
    3: ("Decent {noun}. It is {a}, nothing special otherwise.", "Does what it says for {use}."),
    4: ("Good {noun} for {use}; it really is {a}.", "I use it every day and it is holding up well."),
    5: ("Best {noun} I have owned. Truly {a} and great for {use}.", "Bought a second one as a gift."),
}

#: Instruction templates in the style of WebShop's human-written goals: ``{article}`` (a/an),
#: ``{noun}``, ``{attributes}`` (joined with "and") and ``{options}`` (already phrased) are filled in.
INSTRUCTIONS: tuple[str, ...] = (
    "i am looking for {article} {attributes} {noun}{options}",
    "i need {article} {noun} that is {attributes}{options}",
    "find me {article} {attributes} {noun}{options}",
    "i want to buy {article} {noun} which is {attributes}{options}",
    "i'm looking for {article} {noun} that's {attributes}{options}",
    "get me {article} {attributes} {noun}{options}",
)
